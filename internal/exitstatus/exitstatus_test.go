package exitstatus

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Execute maps what a command returns to the exit status and says where
// the help is only for mistakes in the command line.
func TestExecute(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		run    error
		status int
		stderr []string
		help   bool
	}{
		{"ok", nil, nil, OK, nil, false},
		{"failed", nil, errors.New("the server is unavailable"), Failed, []string{"error: the server is unavailable"}, false},
		{"silent failure", nil, &Error{Code: Failed}, Failed, nil, false},
		{"usage", nil, Usagef("--out is required"), Usage, []string{"error: --out is required"}, true},
		{"unknown flag", []string{"--nope"}, nil, Usage, []string{"unknown flag: --nope"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := &cobra.Command{Use: "tool", SilenceErrors: true, SilenceUsage: true,
				RunE: RunE(func(*cobra.Command, []string) error { return tc.run })}
			root.SetArgs(tc.args)
			var stderr bytes.Buffer
			if got := Execute(context.Background(), root, &stderr); got != tc.status {
				t.Errorf("status %d, want %d", got, tc.status)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr %q lacks %q", stderr.String(), s)
				}
			}
			if help := strings.Contains(stderr.String(), "Run 'tool --help' for usage."); help != tc.help {
				t.Errorf("stderr %q: help pointer %v, want %v", stderr.String(), help, tc.help)
			}
			if tc.stderr == nil && stderr.Len() > 0 {
				t.Errorf("stderr %q, want nothing", stderr.String())
			}
		})
	}
}
