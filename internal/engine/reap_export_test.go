package engine

import (
	"testing"

	"google.golang.org/protobuf/types/known/anypb"
)

// SetReapHook installs testHookReapBatch for one test: f sees each reaper
// batch before it is applied.
func SetReapHook(t testing.TB, f func(recs []*anypb.Any)) { setHook(t, &testHookReapBatch, f) }

// SetBuildHook installs testHookBuildStep for one test: f runs before
// each index build step.
func SetBuildHook(t testing.TB, f func()) { setHook(t, &testHookBuildStep, f) }

// SetBuildEndHook installs testHookBuildEnd for one test: f runs after a
// build's last step, before its outcome is recorded.
func SetBuildEndHook(t testing.TB, f func()) { setHook(t, &testHookBuildEnd, f) }

// SetPlannedHook installs testHookPlanned for one test: f runs after
// ApplySchema has planned, before it commits.
func SetPlannedHook(t testing.TB, f func()) { setHook(t, &testHookPlanned, f) }

// SetCommittingHook installs testHookCommitting for one test: f runs when
// a schema change has read its preconditions, just before it commits.
func SetCommittingHook(t testing.TB, f func()) { setHook(t, &testHookCommitting, f) }

// SetConditionsReadHook installs testHookConditionsRead for one test: f
// runs in a conditional batch on a shared store between its condition
// reads and its record reads.
func SetConditionsReadHook(t testing.TB, f func()) { setHook(t, &testHookConditionsRead, f) }

// SetRefusedHook installs testHookRefused for one test: f runs when the
// records of a conditional batch on a shared store refused it.
func SetRefusedHook(t testing.TB, f func()) { setHook(t, &testHookRefused, f) }

// setHook sets *hook to f for one test.
func setHook[F any](t testing.TB, hook *F, f F) {
	*hook = f
	t.Cleanup(func() {
		var none F
		*hook = none
	})
}
