package experiments_test

import (
	"slices"
	"testing"

	"github.com/protobase/protobase/bench"
	_ "github.com/protobase/protobase/bench/experiments"
)

// Importing the package registers every experiment, listed by name,
// each found by Lookup as a fresh instance.
func TestAllRegistered(t *testing.T) {
	want := []string{"batching", "concurrency", "fetch", "ingest", "layout", "oneop", "patterns", "transports", "watch"}
	var got []string
	for _, x := range bench.Experiments() {
		got = append(got, x.Name())
		if x.Describe() == "" {
			t.Errorf("%s has no description", x.Name())
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("experiments %q, want %q", got, want)
	}
	for _, name := range want {
		a, err := bench.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := bench.Lookup(name); a == b {
			t.Errorf("%s: Lookup returned the same instance twice", name)
		}
	}
	if _, err := bench.Lookup("nope"); err == nil {
		t.Error("unknown experiment found")
	}
}
