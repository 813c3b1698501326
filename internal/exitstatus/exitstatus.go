// Package exitstatus owns the exit statuses of Protobase's command-line
// tools (protobase, protobase-bench) and the error that carries one: 0
// when the command did what it was asked, 1 when an operation failed, 2
// when the command line is wrong (then the tool also says where its help
// is). Scripts tell the last two apart: a wrong command line is not worth
// retrying.
package exitstatus

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// The exit statuses.
const (
	OK     = 0
	Failed = 1
	Usage  = 2
)

// Error carries the exit status of a failed command. Execute prints Err
// (when set) and exits with Code.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// UsageError marks err as a mistake in the command line (status Usage).
func UsageError(err error) error { return &Error{Code: Usage, Err: err} }

// Usagef is UsageError with a format.
func Usagef(format string, args ...any) error { return UsageError(fmt.Errorf(format, args...)) }

// RunE adapts a command's run function: any error it returns that is not
// already an *Error means the operation failed (status Failed).
func RunE(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := f(cmd, args)
		if err == nil {
			return nil
		}
		var ee *Error
		if errors.As(err, &ee) {
			return err
		}
		return &Error{Code: Failed, Err: err}
	}
}

// Execute runs root and returns the process's exit status. A failed
// operation's error is printed to stderr; a usage error (one of
// UsageError's, or cobra's: an unknown command or flag, a wrong number of
// arguments, a missing required flag) is printed with where the command's
// help is.
func Execute(ctx context.Context, root *cobra.Command, stderr io.Writer) int {
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return OK
	}
	var ee *Error
	if errors.As(err, &ee) && ee.Code != Usage {
		if ee.Err != nil {
			fmt.Fprintf(stderr, "error: %v\n", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintf(stderr, "error: %v\n", err)
	if cmd == nil {
		cmd = root
	}
	fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	return Usage
}
