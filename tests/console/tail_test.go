package console_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func testStartTail(t *testing.T, s *session) {
	s.watch = startTail(s, "watch", "")
	s.filtered = startTail(s, "filtered", `name prefix "tail-"`)
}

// startTail opens the changes page in a new tab and starts a tail of
// shop.Item with filter.
func startTail(s *session, name, filter string) *tab {
	tb := s.b.newTab(name)
	tb.signIn(s.e, adminKey)
	tb.route("#/changes")
	tb.do("changes page", chromedp.WaitVisible("#watch-start"))
	tb.choose("#watch-types", itemType)
	tb.fill("#watch-filter", filter)
	tb.do("start", chromedp.Click("#watch-start"))
	tb.waitFor("live", `/live/i.test(document.querySelector("#watch-status")?.textContent ?? "")`)
	return tb
}

func testPauseResume(t *testing.T, s *session) {
	w := s.watch
	w.do("pause", chromedp.Click("#watch-pause"))
	w.waitFor("paused", `/paused/i.test(document.querySelector("#watch-status")?.textContent ?? "")`)
	update := func(from, to int64) {
		var recs []*anypb.Any
		for id := from; id <= to; id++ {
			it := seedItem(id)
			it.Name = fmt.Sprintf("tail-%d", id)
			recs = append(recs, s.e.ts.Rec(itemType, it.json()))
		}
		if _, err := s.e.ts.Write(pb.WriteOp_WRITE_OP_UPDATE, recs); err != nil {
			t.Fatalf("update items %d..%d: %v", from, to, err)
		}
	}
	update(100, 104)
	// Changes may not show while paused; an implementation that shows
	// them late passes this check, one that shows them at all may fail it.
	if keys := s.watch.changeKeys(itemType); slices.Contains(keys, "100") {
		t.Errorf("the paused tail shows a change written while paused: %v", keys)
	}
	w.do("resume", chromedp.Click("#watch-resume"))
	w.waitFor("live again", `/live/i.test(document.querySelector("#watch-status")?.textContent ?? "")`)
	update(105, 109)
	// A change of a type the tail did not choose, then the marker: changes
	// arrive in commit order, so once the marker shows, the other type's
	// change would have too.
	if _, err := s.e.ts.Write(pb.WriteOp_WRITE_OP_UPSERT, []*anypb.Any{
		s.e.ts.Rec(secretType, `{"id": 1, "note": "not watched"}`)}); err != nil {
		t.Fatal(err)
	}
	update(110, 110)
	w.waitFor("the marker", `[...document.querySelectorAll("ol#changes li[data-type='shop.Item']")].some(li => /tail-110/.test(li.textContent))`)
	// Every change of the scenarios so far, once each, oldest first: a
	// resume from the wrong position repeats or drops one at the seam.
	want := []string{"UPDATE 1", "UPDATE 2", "INSERT 10001", "REMOVE 10001"}
	for id := 100; id <= 110; id++ {
		want = append(want, fmt.Sprintf("UPDATE %d", id))
	}
	got := w.changeOps(itemType)
	if len(got) > 1 && got[0] != want[0] {
		slices.Reverse(got) // newest first
	}
	if !slices.Equal(got, want) {
		t.Errorf("after pause and resume the tail shows\n%q\nwant\n%q", got, want)
	}
	if other := w.changeOps(secretType); len(other) > 0 {
		t.Errorf("the tail of %s shows changes of %s: %q", itemType, secretType, other)
	}
	// The filtered tail, never paused, shows the changes whose record
	// matches its filter: the updates naming items "tail-N" alone.
	s.filtered.waitFor("the marker", `[...document.querySelectorAll("ol#changes li[data-op]")].some(li => /tail-110/.test(li.textContent))`)
	got = s.filtered.changeOps(itemType)
	if len(got) > 1 && got[0] != want[4] {
		slices.Reverse(got)
	}
	if !slices.Equal(got, want[4:]) {
		t.Errorf("the tail filtered by name shows\n%q\nwant\n%q", got, want[4:])
	}
	w.screenshot("changes-resumed")
}
