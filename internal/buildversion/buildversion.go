// Package buildversion owns what a command of this module reports as its
// version: the release version stamped at build time, else the module's
// version from the build information, with the commit it was built from
// (when recorded) and the Go toolchain and platform. protobase and
// protobase-bench report it alike, so that one release's binaries say
// which release they are.
package buildversion

import (
	"runtime"
	"runtime/debug"
)

// String is "VERSION (commit REV, GO OS/ARCH)". stamped is the command's
// main.version, which a release sets with -ldflags "-X main.version=V"
// (scripts/release, make build); when it is empty the module version is
// used, or "dev". The commit is left out when the build recorded none
// (-buildvcs=false, or no repository).
func String(stamped string) string {
	v := stamped
	commit := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		commit = revision(bi)
	}
	if v == "" {
		v = "dev"
	}
	s := v + " ("
	if commit != "" {
		s += "commit " + commit + ", "
	}
	return s + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
}

// revision is the build's commit, shortened to 12 characters, with
// "-dirty" when the tree had changes.
func revision(bi *debug.BuildInfo) string {
	var commit string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
			if len(commit) > 12 {
				commit = commit[:12]
			}
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if commit != "" && modified {
		commit += "-dirty"
	}
	return commit
}
