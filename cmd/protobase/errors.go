package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/protobase/protobase/client"
)

// exitError carries the exit code of a failed command. run prints err (when
// set) and exits with code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

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

// callError describes the failed call op to the server at addr: the status
// code and the server's message, or that the server could not be reached.
func callError(op, addr string, err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if ce.Status.Code() == codes.Unavailable {
		return fmt.Errorf("%s: the server at %s is unavailable: %s", op, addr, ce.Status.Message())
	}
	return fmt.Errorf("%s failed (%s):\n%s", op, ce.Status.Code(), ce.Status.Message())
}
