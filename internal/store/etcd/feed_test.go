package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
)

// errStop ends a Changes call from its fn.
var errStop = errors.New("stop")

// apply commits one batch and returns its revision.
func apply(t *testing.T, s *etcd.Store, fill func(b store.WriteBatch)) int64 {
	t.Helper()
	b := s.NewWriteBatch()
	defer b.Close()
	fill(b)
	if err := s.ApplyBatch(b); err != nil {
		t.Fatal(err)
	}
	return int64(b.Position())
}

// show renders one revision of a feed, telling a nil value from an empty
// one.
func show(rev int64, evs []store.Event) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d:", rev)
	q := func(b []byte) string {
		if b == nil {
			return "nil"
		}
		return fmt.Sprintf("%q", b)
	}
	for _, e := range evs {
		op := "set"
		if e.Delete {
			op = "del"
		}
		fmt.Fprintf(&sb, " %s %s=%s (was %s);", op, e.Key, q(e.Value), q(e.Prev))
	}
	return sb.String()
}

// changes collects the revisions after `after` until the first at or past
// until, within a minute.
func changes(t *testing.T, s *etcd.Store, prefix string, after, until int64) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []string
	err := s.Changes(ctx, []byte(prefix), after, func(rev int64, evs []store.Event) error {
		if len(evs) > 0 { // not a progress mark
			got = append(got, show(rev, evs))
		}
		if rev >= until {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return got, err
}

func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// A revision comes as one call with the batch's events in the order it
// wrote them, with previous values, deletions and nothing from outside the
// prefix; a start after a revision gives exactly the later ones.
func TestFeedRevisions(t *testing.T) {
	s := open(t, etcdtest.Start(t, etcdtest.Roomy))
	ctx := context.Background()
	r0, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set := func(b store.WriteBatch, k, v string) { b.Set([]byte(k), []byte(v)) }
	r1 := apply(t, s, func(b store.WriteBatch) {
		set(b, "p/c", "1")
		set(b, "q/x", "0")
		set(b, "p/a", "1")
		set(b, "p/b", "1")
	})
	r2 := apply(t, s, func(b store.WriteBatch) {
		set(b, "p/b", "2")
		b.Delete([]byte("p/a"))
		b.Delete([]byte("p/absent"))
		set(b, "p/d", "")
	})
	r3 := apply(t, s, func(b store.WriteBatch) { b.DeleteRange([]byte("p/c"), []byte("p/e")) })
	apply(t, s, func(b store.WriteBatch) { set(b, "q/y", "0") })
	r5 := apply(t, s, func(b store.WriteBatch) { set(b, "p/e", "5") })
	if cur, err := s.Revision(ctx); err != nil || cur != r5 {
		t.Errorf("Revision = %d, %v; want %d", cur, err, r5)
	}
	all := []string{
		fmt.Sprintf(`%d: set p/c="1" (was nil); set p/a="1" (was nil); set p/b="1" (was nil);`, r1),
		fmt.Sprintf(`%d: set p/b="2" (was "1"); del p/a=nil (was "1"); set p/d="" (was nil);`, r2),
		fmt.Sprintf(`%d: del p/c=nil (was "1"); del p/d=nil (was "");`, r3),
		fmt.Sprintf(`%d: set p/e="5" (was nil);`, r5),
	}
	for i, after := range []int64{r0, r1, r2, r3} {
		got, err := changes(t, s, "p/", after, r5)
		if err != nil {
			t.Fatalf("Changes after %d: %v", after, err)
		}
		equalLines(t, fmt.Sprintf("changes after %d", after), got, all[i:])
	}
	got, err := changes(t, s, "", r0, r1)
	if err != nil {
		t.Fatal(err)
	}
	equalLines(t, "changes of the whole store", got,
		[]string{fmt.Sprintf(`%d: set p/c="1" (was nil); set q/x="0" (was nil); set p/a="1" (was nil); set p/b="1" (was nil);`, r1)})
}

// fn's error ends Changes with that error; the end of ctx ends it with
// ctx.Err(), promptly, also while it waits for a change.
func TestFeedEnds(t *testing.T) {
	s := open(t, etcdtest.Start(t, etcdtest.Roomy))
	r0, err := s.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, func(b store.WriteBatch) { b.Set([]byte("a"), nil) })
	mine := errors.New("mine")
	err = s.Changes(context.Background(), nil, r0, func(int64, []store.Event) error { return mine })
	if !errors.Is(err, mine) {
		t.Errorf("Changes whose fn fails = %v; want fn's error", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	first := make(chan int64, 1)
	go func() {
		done <- s.Changes(ctx, nil, r0, func(rev int64, _ []store.Event) error {
			select {
			case first <- rev:
			default:
			}
			return nil
		})
	}()
	<-first // the watch is running: what follows waits for a change
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Changes after cancel = %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Changes still running 10 s after its context ended")
	}
}

// A start the cluster has compacted is a *CompactedError naming the first
// revision it can still give, and a start there gives what follows.
func TestFeedCompacted(t *testing.T) {
	s := open(t, etcdtest.Start(t, etcdtest.Roomy))
	r0, err := s.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, func(b store.WriteBatch) { b.Set([]byte("a"), []byte("1")); b.Set([]byte("b"), []byte("1")) })
	r2 := apply(t, s, func(b store.WriteBatch) { b.Delete([]byte("b")) })
	r3 := apply(t, s, func(b store.WriteBatch) { b.Set([]byte("a"), []byte("3")) })
	if _, err := s.Client().Compact(context.Background(), r2); err != nil {
		t.Fatal(err)
	}
	// r2's deletion is gone from etcd's history (the state at r2 is kept),
	// so the first revision whose changes are whole is r2+1.
	for _, after := range []int64{r0, r2 - 1} {
		_, err := changes(t, s, "", after, r3)
		var ce *store.CompactedError
		if !errors.As(err, &ce) || !errors.Is(err, store.ErrCompacted) || ce.Oldest != r2+1 {
			t.Errorf("Changes after %d with history compacted at %d = %v; want a CompactedError with Oldest %d", after, r2, err, r2+1)
		}
	}
	got, err := changes(t, s, "", r2, r3)
	if err != nil {
		t.Fatalf("Changes after the compaction revision: %v", err)
	}
	equalLines(t, "changes after the compaction", got, []string{fmt.Sprintf(`%d: set a="3" (was "1");`, r3)})
}

// A reader slower than the writers loses nothing and sees nothing twice:
// past its buffer the feed lets the watch go and reads the history back.
func TestFeedSlowReader(t *testing.T) {
	s := open(t, etcdtest.Start(t, etcdtest.Roomy))
	r0, err := s.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	want := make([]string, 0, n)
	written := make(chan struct{})
	first := make(chan struct{})
	go func() {
		<-first
		for i := range n {
			b := s.NewWriteBatch()
			b.Set([]byte("k"), fmt.Append(nil, i))
			if err := s.ApplyBatch(b); err != nil {
				t.Error(err)
				break
			}
			prev := "nil"
			if i > 0 {
				prev = fmt.Sprintf("%q", fmt.Sprint(i-1))
			}
			want = append(want, fmt.Sprintf(`%d: set k="%d" (was %s);`, b.Position(), i, prev))
			b.Close()
		}
		close(written)
	}()
	apply(t, s, func(b store.WriteBatch) { b.Set([]byte("start"), nil) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []string
	started := false
	err = s.Changes(ctx, nil, r0, func(rev int64, evs []store.Event) error {
		if len(evs) == 0 {
			return nil // a progress mark
		}
		if !started {
			started = true
			close(first)
			<-written // hold the feed while every batch is written
			return nil
		}
		got = append(got, show(rev, evs))
		if len(got) == n {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("Changes = %v after %d revisions", err, len(got))
	}
	<-written
	equalLines(t, "changes read slowly", got, want)
}

// A feed with nothing under its prefix to deliver still hears how far the
// cluster has got: a progress mark, fn(rev, nil), past the writes elsewhere.
func TestFeedProgressMarks(t *testing.T) {
	s := open(t, etcdtest.Start(t, etcdtest.Roomy))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r0, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var elsewhere int64
	for i := range 3 {
		elsewhere = apply(t, s, func(b store.WriteBatch) { b.Set(fmt.Appendf(nil, "q/%d", i), nil) })
	}
	var marks []int64
	var got []string
	wrote := int64(0)
	err = s.Changes(ctx, []byte("p/"), r0, func(rev int64, evs []store.Event) error {
		if len(evs) == 0 {
			marks = append(marks, rev)
			if rev >= elsewhere && wrote == 0 {
				wrote = apply(t, s, func(b store.WriteBatch) { b.Set([]byte("p/x"), nil) })
			}
			return nil
		}
		got = append(got, show(rev, evs))
		return errStop
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("Changes = %v", err)
	}
	if len(marks) == 0 || marks[0] < elsewhere {
		t.Errorf("progress marks %v; want one at %d or later first", marks, elsewhere)
	}
	if !slices.IsSorted(marks) || marks[len(marks)-1] >= wrote {
		t.Errorf("progress marks %v: not increasing, or not before the change at %d", marks, wrote)
	}
	equalLines(t, "changes", got, []string{fmt.Sprintf(`%d: set p/x="" (was nil);`, wrote)})
}
