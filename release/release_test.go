package release

import (
	"bufio"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// testVersion is the version the tests stamp into the binaries they build.
const testVersion = "v0.0.0-releasetest"

// root is the repository's root, where scripts/release and the Containerfile are.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	buildOnce sync.Once
	buildDir  string
	buildOut  []byte
	buildErr  error
)

// releaseBuild runs scripts/release for this machine's platform, building
// protobase alone (protobase-bench takes as long again and ships from the
// same loop), once for every test of the package, and returns the output
// directory.
func releaseBuild(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "protobase-release-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command(filepath.Join(root(t), "scripts", "release"), testVersion, buildDir, runtime.GOOS+"/"+runtime.GOARCH)
		cmd.Env = append(os.Environ(), "COMMANDS=protobase")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("scripts/release: %v\n%s", buildErr, buildOut)
	}
	return buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binaryName is the file name scripts/release gives a command's binary.
func binaryName(cmd, goos, goarch string) string {
	return cmd + "-" + testVersion + "-" + goos + "-" + goarch
}

// The release build stamps its version into the binary, lists what it
// wrote, and writes SHA256SUMS in sha256sum's format over what it built.
func TestReleaseBuild(t *testing.T) {
	dir := releaseBuild(t)
	name := binaryName("protobase", runtime.GOOS, runtime.GOARCH)
	if !strings.Contains(string(buildOut), name) || !strings.Contains(string(buildOut), "SHA256SUMS") {
		t.Errorf("the release build did not list what it wrote:\n%s", buildOut)
	}

	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, err := exec.Command(filepath.Join(dir, name), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("protobase %s: %v\n%s", args[0], err, out)
		}
		want := "protobase " + testVersion + " (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
		if string(out) != want {
			t.Errorf("protobase %s printed %q, want %q", args[0], out, want)
		}
	}

	sums := readSums(t, filepath.Join(dir, "SHA256SUMS"))
	if len(sums) != 1 {
		t.Fatalf("SHA256SUMS lists %v, want %s alone", sums, name)
	}
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	got := sha256.Sum256(data)
	if sums[name] != hex.EncodeToString(got[:]) {
		t.Errorf("SHA256SUMS has %s for %s, the file's is %x", sums[name], name, got)
	}
	if sha, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command(sha, "-c", "SHA256SUMS")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
		}
	}

	if runtime.GOOS == "linux" {
		wantStatic(t, filepath.Join(dir, name))
	}
}

var sumLine = regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)

// readSums reads a file in sha256sum's format: file name to hex digest.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := sumLine.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("%s: line %q is not \"SHA256  NAME\"", path, sc.Text())
		}
		sums[m[2]] = m[1]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sums
}

// wantStatic fails unless the ELF file at path is statically linked: no
// program interpreter (the dynamic loader an image FROM scratch lacks) and
// no dynamic section or needed libraries.
func wantStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a %v program header: not static", filepath.Base(path), p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("%s needs the libraries %v (%v): not static", filepath.Base(path), libs, err)
	}
}

// The release build refuses a version or platform that would change the
// meaning of a file name or of the linker flag it is stamped with.
func TestReleaseBadArguments(t *testing.T) {
	script := filepath.Join(root(t), "scripts", "release")
	for _, args := range [][]string{
		{},
		{testVersion, t.TempDir()},
		{"v1 -X main.x=y", t.TempDir(), "linux/amd64"},
		{"../v1", t.TempDir(), "linux/amd64"},
		{testVersion, t.TempDir(), "linux"},
	} {
		out, err := exec.Command(script, args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("scripts/release %q: %v, want exit 2\n%s", args, err, out)
		}
	}
}
