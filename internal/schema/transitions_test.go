package schema

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestPlanTransitions runs the cases of testdata/transitions: each .txtar
// holds a comment, the old files (-- old/NAME --), the new files
// (-- new/NAME --), the records each old type holds (-- records --, lines
// "TYPE COUNT") and the outcome (-- want --): "refused REASON" and the
// problems, one a line, or "applied" and every change of types_changed as
// "TYPE: CHANGE".
func TestPlanTransitions(t *testing.T) {
	paths, err := filepath.Glob("testdata/transitions/*.txtar")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sections := splitArchive(string(raw))
			oldFiles, newFiles := map[string]string{}, map[string]string{}
			counts := map[protoreflect.FullName]uint64{}
			var want []string
			for name, body := range sections {
				switch {
				case strings.HasPrefix(name, "old/"):
					oldFiles[strings.TrimPrefix(name, "old/")] = body
				case strings.HasPrefix(name, "new/"):
					newFiles[strings.TrimPrefix(name, "new/")] = body
				case name == "records":
					for _, line := range nonEmptyLines(body) {
						typ, n, _ := strings.Cut(line, " ")
						v, err := strconv.ParseUint(n, 10, 64)
						if err != nil {
							t.Fatalf("records line %q: %v", line, err)
						}
						counts[protoreflect.FullName(typ)] = v
					}
				case name == "want":
					want = nonEmptyLines(body)
				default:
					t.Fatalf("unknown section %q", name)
				}
			}
			if len(want) == 0 {
				t.Fatal("no want section")
			}
			ctx := context.Background()
			old, err := Plan(ctx, nil, PlanRequest{Files: oldFiles}, nil)
			if err != nil {
				t.Fatalf("old files: %v", err)
			}
			r, err := Plan(ctx, old.State, PlanRequest{Files: newFiles}, func(rt *RecordType) (uint64, error) {
				return counts[rt.Name], nil
			})
			var got []string
			var pe *PlanError
			switch {
			case errors.As(err, &pe):
				got = append([]string{"refused " + pe.Reason}, pe.Problems...)
			case err != nil:
				t.Fatalf("Plan: %v", err)
			default:
				got = []string{"applied"}
				for _, tc := range r.Plan.TypesChanged {
					for _, c := range tc.Changes {
						got = append(got, tc.Type+": "+c)
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// splitArchive splits a txtar-style file into its sections by name; the
// comment before the first section is dropped.
func splitArchive(s string) map[string]string {
	out := map[string]string{}
	name := ""
	var body strings.Builder
	flush := func() {
		if name != "" {
			out[name] = body.String()
		}
		body.Reset()
	}
	for _, line := range strings.SplitAfter(s, "\n") {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			flush()
			name = strings.TrimSuffix(strings.TrimPrefix(trimmed, "-- "), " --")
			continue
		}
		body.WriteString(line)
	}
	flush()
	return out
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
