package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/internal/buildversion"
	"github.com/protobase/protobase/internal/exitstatus"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=v1.2.3". Without it, the module version from
// the build information is used, or "dev".
var version = ""

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Long: `Print the version of the protobase binary, the commit it was built from
(when known) and the Go toolchain and platform.`,
		Example: `  protobase version`,
		Args:    cobra.NoArgs,
		RunE: exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(a.stdout, "protobase %s\n", versionString())
			return err
		}),
	}
}

// versionString is "VERSION (commit REV, GO OS/ARCH)".
func versionString() string { return buildversion.String(version) }
