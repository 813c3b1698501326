package engine

import (
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
)

// SetReapHook installs testHookReapBatch for one test: f sees each reaper
// batch before it is applied.
func SetReapHook(t testing.TB, f func(recs []*anypb.Any)) {
	testHookReapBatch = f
	t.Cleanup(func() { testHookReapBatch = nil })
}

// SetBuildHook installs testHookBuildStep for one test: f runs before
// each index build step.
func SetBuildHook(t testing.TB, f func()) {
	testHookBuildStep = f
	t.Cleanup(func() { testHookBuildStep = nil })
}

// SetBuildEndHook installs testHookBuildEnd for one test: f runs after a
// build's last step, before its outcome is recorded.
func SetBuildEndHook(t testing.TB, f func()) {
	testHookBuildEnd = f
	t.Cleanup(func() { testHookBuildEnd = nil })
}

// SetPlannedHook installs testHookPlanned for one test: f runs after
// ApplySchema has planned, before it commits.
func SetPlannedHook(t testing.TB, f func()) {
	testHookPlanned = f
	t.Cleanup(func() { testHookPlanned = nil })
}

// SetCommittingHook installs testHookCommitting for one test: f runs when
// a schema change has read its preconditions, just before it commits.
func SetCommittingHook(t testing.TB, f func()) {
	testHookCommitting = f
	t.Cleanup(func() { testHookCommitting = nil })
}
