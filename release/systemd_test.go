package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// systemdUnit returns the unit of docs/operations.md's "Running under
// systemd": its first ini block.
func systemdUnit(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "\n## Running under systemd\n")
	if !ok {
		t.Fatal(`docs/operations.md has no section "Running under systemd"`)
	}
	_, unit, ok := strings.Cut(sec, "```ini\n")
	unit, _, closed := strings.Cut(unit, "```")
	if !ok || !closed {
		t.Fatal(`"Running under systemd" has no ini block`)
	}
	return unit
}

// unitSettings returns the unit's KEY=VALUE lines, every value of a key
// in order.
func unitSettings(unit string) map[string][]string {
	set := map[string][]string{}
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		set[k] = append(set[k], v)
	}
	return set
}

// wantServeVariables fails unless each PROTOBASE_ variable of env is one
// serve reads (serve --help lists each flag's variable): the server
// ignores a variable it does not know, so a misspelt one would pass
// unnoticed.
func wantServeVariables(t *testing.T, bin string, env map[string]string) {
	t.Helper()
	help, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("serve --help: %v\n%s", err, help)
	}
	for k := range env {
		if !strings.Contains(string(help), "[$"+k+"]") {
			t.Errorf("%s is not a variable serve reads", k)
		}
	}
}

// The unit of docs/operations.md runs the server as its own user with the
// hardening it claims, its data directory the one path it may write, its
// variables ones serve reads; and systemd-analyze verify, where installed,
// accepts it.
func TestSystemdUnit(t *testing.T) {
	unit := systemdUnit(t)
	set := unitSettings(unit)
	env := map[string]string{}
	for _, e := range set["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	data := env["PROTOBASE_DATA"]
	for k, want := range map[string]string{
		"User":            "protobase",
		"ExecStart":       "/usr/local/bin/protobase serve",
		"NoNewPrivileges": "yes",
		"ProtectSystem":   "strict",
		"ReadWritePaths":  data,
		"StateDirectory":  strings.TrimPrefix(data, "/var/lib/"),
		"Restart":         "on-failure",
		"LimitNOFILE":     "65536",
	} {
		if got := strings.Join(set[k], " "); got != want || want == "" {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}

	bin := filepath.Join(releaseBuild(t), binaryName("protobase", runtime.GOOS, runtime.GOARCH))
	wantServeVariables(t, bin, env)

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed: the unit is not verified by systemd")
		return
	}
	// verify requires ExecStart's binary to exist: the one just built
	// stands in for /usr/local/bin/protobase.
	path := filepath.Join(t.TempDir(), "protobase.service")
	if err := os.WriteFile(path, []byte(strings.Replace(unit, "/usr/local/bin/protobase", bin, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
