package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/server"
)

// exitError carries the exit code of a failed command. run prints err and
// exits with code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a mistake in the command line (exit 2).
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// usagef is usageError with a format.
func usagef(format string, args ...any) error { return usageError(fmt.Errorf(format, args...)) }

// runE adapts a command's run function: any error it returns that is not
// already an exitError means the operation failed (exit 1).
func runE(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := f(cmd, args)
		if err == nil {
			return nil
		}
		var ee *exitError
		if errors.As(err, &ee) {
			return err
		}
		return &exitError{code: exitFailed, err: err}
	}
}

// etcdFlags names the flag of each server.Config field that the lab's
// --store etcd sets.
var etcdFlags = map[string]string{
	"Etcd":           "the --etcd-* flags",
	"Etcd.Endpoints": "--etcd-endpoints",
	"Etcd.Prefix":    "--etcd-prefix",
}

// configError rewrites the server's configuration error in the lab's flag
// names.
func configError(err error) error {
	var ce *server.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	return errors.New(ce.Message(func(field string) string {
		if flag, ok := etcdFlags[field]; ok {
			return flag
		}
		return field
	}))
}
