package main

import "github.com/protobase/protobase/internal/buildversion"

// version is the release version, set at build time with
// -ldflags "-X main.version=v1.2.3" (scripts/release); without it the
// module version from the build information is used, or "dev".
var version = ""

// versionString is what --version prints after the command's name.
func versionString() string { return buildversion.String(version) }
