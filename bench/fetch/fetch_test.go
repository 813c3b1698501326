package fetch

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/bench/labtest"
	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The generator's names contain the seed's keywords in the seed's shares:
// "ff" in 18,081 of 110,000 (16.4%), "e" in 1,039,693 of 1,100,000
// (94.5%). With 110,000 draws the standard error of a share is about
// 0.1%, so half a point is a wide margin that still catches a wrong
// class in the name lists.
func TestUserGenShares(t *testing.T) {
	const n = 110000
	g := newUserGen(4)
	var ff, e int
	for range n {
		u := g.user()
		if strings.Contains(u.name, "ff") {
			ff++
		}
		if strings.Contains(u.name, "e") {
			e++
		}
	}
	for _, c := range []struct {
		kw         string
		got, share float64
	}{{"ff", float64(ff) / n, seedShareFF}, {"e", float64(e) / n, seedShareE}} {
		if math.Abs(c.got-c.share) > 0.005 {
			t.Errorf("%q: %.2f%% of names, seed %.2f%%", c.kw, 100*c.got, 100*c.share)
		}
	}
}

// A seed gives one table, and a smaller table is a prefix of a larger one.
func TestUserGenDeterministic(t *testing.T) {
	a, b := newUserGen(7), newUserGen(7)
	for i := range 1000 {
		ua, ub := a.user(), b.user()
		if ua != ub || ua.id != int64(i+1) {
			t.Fatalf("draw %d: %+v and %+v", i, ua, ub)
		}
	}
	if newUserGen(8).user() == newUserGen(7).user() {
		t.Fatal("seeds 7 and 8 drew the same first user")
	}
}

// Each name part is in the class the generator relies on.
func TestUserNameParts(t *testing.T) {
	check := func(parts []string, ff, e bool) {
		for _, p := range parts {
			if strings.Contains(p, "ff") != ff || strings.Contains(p, "e") != e {
				t.Errorf("%q: want ff=%v e=%v", p, ff, e)
			}
		}
	}
	check(givenNoE, false, false)
	check(givenWithE, false, true)
	for ff := range 2 {
		for e := range 2 {
			check(familyNames[ff][e], ff == 1, e == 1)
		}
	}
}

func TestCheckIDs(t *testing.T) {
	want := []int64{2, 4, 6, 8}
	for _, c := range []struct {
		got  []int64
		fail string // "" for no error, else a substring of the error
	}{
		{[]int64{8, 6, 4, 2}, ""},
		{[]int64{8, 6, 4}, "1 ids missing (first [2])"},
		{[]int64{8, 7, 6, 4, 2}, "1 ids unexpected (first [7])"},
		{[]int64{8, 6, 6, 4, 2}, "1 ids repeated (first [6])"},
		{[]int64{8, 6, 2, 4}, "not in descending order at position 3"},
		{[]int64{10, 6, 4, 2}, "missing (first [8])"},
		{nil, "4 ids missing"},
		{[]int64{-1, 8, 6, 4, 2}, "unexpected (first [-1])"},
	} {
		err := checkIDs(want, c.got)
		switch {
		case c.fail == "" && err != nil:
			t.Errorf("%v: %v", c.got, err)
		case c.fail != "" && (err == nil || !strings.Contains(err.Error(), c.fail)):
			t.Errorf("%v: error %v, want one saying %q", c.got, err, c.fail)
		}
	}
	if err := checkIDs(nil, nil); err != nil {
		t.Errorf("empty: %v", err)
	}
}

// Every method returns the ids the generator says match, and a method
// that loses a row fails the run.
func TestFetchMethodsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	ctx := t.Context()
	tg := labtest.Target(t, bench.TargetConfig{NoSync: true})
	if err := tg.EnsureSchema(ctx, usersSchema); err != nil {
		t.Fatal(err)
	}
	want, err := loadUsers(ctx, bench.NoProgress{}, tg, 3000, 4, "e")
	if err != nil {
		t.Fatal(err)
	}
	f := &Experiment{Page: 250}
	q := fetchQuery("e")
	wc := new(wireCounter)
	for _, m := range fetchMethods {
		runs := new(fetchRuns)
		c, err := f.workload(tg.Client, wc, m, q, want, true, runs)(ctx, 0)
		if err != nil || c.Ops != int64(len(want)) {
			t.Fatalf("%s: %d rows (%v), want %d", m.name, c.Ops, err, len(want))
		}
	}
	lossy := fetchMethod{name: "lossy", fetch: func(ctx context.Context, c *client.Client, q *pb.Query, page int, ids []int64) ([]int64, error) {
		ids, err := fetchPages(ctx, c, q, page, ids)
		return ids[1:], err
	}}
	if _, err := f.workload(tg.Client, wc, lossy, q, want, false, new(fetchRuns))(ctx, 0); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a method losing a row: %v", err)
	}
}

// The quick run fetches every match with every method, and the server did
// what each method claims: one Scan reads every user once (the keyword
// needs a full scan); pages read every user too, in as many queries as
// pages, resuming where the last ended; offset paging re-reads earlier
// rows and runs the most queries. Rows/s times seconds is the rows
// matched, and offset moves more bytes than pages.
func TestQuickRunMatchesServerCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and measures")
	}
	const users = 3000
	f := &Experiment{Users: []int{users}, Page: 250}
	res, _ := labtest.Run(t, f)
	labtest.CheckResult(t, f, res)
	secs, rates, mbs := labtest.Rows(res, "s"), labtest.Rows(res, "rows/s"), labtest.Rows(res, "MB moved")
	for _, m := range fetchMethods {
		label := fmt.Sprintf("users=%d %s", users, m.name)
		w, ok := f.served[label]
		if !ok || w.fetches != 1 || w.queryErrors != 0 {
			t.Fatalf("%s: server work %+v, want one fetch without errors", label, w)
		}
		rows := rates[label].Params["rows"].(int)
		if got := rates[label].Median * secs[label].Median; math.Abs(got-float64(rows)) > 0.01*float64(rows) {
			t.Errorf("%s: rows/s × s = %.0f, %d rows matched", label, got, rows)
		}
		pages := uint64((rows + f.Page - 1) / f.Page)
		switch {
		case m.parallelism > 0:
			if w.queries != 1 || w.recordsRd != users {
				t.Errorf("%s: %d queries reading %d records, want 1 reading %d", label, w.queries, w.recordsRd, users)
			}
		case m.name == "pages":
			// A page may read a few rows near its boundary twice;
			// nothing like offset's re-reading of every earlier page.
			if w.queries < pages || w.queries > pages+1 || w.recordsRd < users || w.recordsRd > users+users/20 {
				t.Errorf("%s: %d queries reading %d records, want %d pages reading each of %d users about once", label, w.queries, w.recordsRd, pages, users)
			}
		case m.name == "offset":
			pw := f.served[fmt.Sprintf("users=%d pages", users)]
			if w.queries < pages || w.recordsRd <= pw.recordsRd || mbs[label].Median <= mbs[fmt.Sprintf("users=%d pages", users)].Median {
				t.Errorf("%s: %d queries reading %d records, moving %v MB; pages read %d", label, w.queries, w.recordsRd, mbs[label].Median, pw.recordsRd)
			}
		}
	}
}
