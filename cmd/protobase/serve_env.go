package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// Every serve flag can also come from the environment, for containers and
// service managers: PROTOBASE_ and the flag's name in upper case with _
// for - (--grpc-addr: $PROTOBASE_GRPC_ADDR). A flag on the command line
// wins; an empty variable counts as unset.

func envName(flag string) string {
	return "PROTOBASE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// annotateEnv appends each flag's variable to its usage, so that --help
// lists them.
func annotateEnv(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		f.Usage += " [$" + envName(f.Name) + "]"
	})
}

// applyEnv sets each flag of fs not given on the command line from its
// variable; a value the flag refuses is an error naming the variable.
func applyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := envName(f.Name)
		v, ok := lookup(name)
		if !ok || v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("$%s=%q: %w", name, v, err))
		}
	})
	return errors.Join(errs...)
}
