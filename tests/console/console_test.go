package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// session is what the scenarios of TestConsole share: one server, one
// browser, and the admin's tabs, which later scenarios go on from.
type session struct {
	e *env
	b *browser
	// admin browses and edits; watch follows the change tail of shop.Item
	// from the "start the tail" scenario on, and filtered the changes
	// that match a filter.
	admin, watch, filtered *tab
}

// TestConsole drives the console through a headless chromium, scenario
// after scenario on one server and one browser: later scenarios use what
// earlier ones left (the admin's tab signed in, the tail started).
func TestConsole(t *testing.T) {
	chromiumPath(t) // before seeding: fail or skip at once
	e := startEnv(t)
	s := &session{e: e, b: startBrowser(t, strings.TrimPrefix(e.base, "http://"), e.secrets())}
	scenarios := []struct {
		name string
		run  func(*testing.T, *session)
	}{
		{"sign in", testSignIn},
		{"types", testTypes},
		{"pages", testPages},
		{"filter", testFilter},
		{"sort by an index", testSort},
		{"open a record", testOpenRecord},
		{"start the tail", testStartTail},
		{"edit", testEdit},
		{"conflicting edit", testConflict},
		{"insert and delete", testInsertDelete},
		{"pause and resume the tail", testPauseResume},
		{"read-only key", testReadOnly},
		{"scoped key", testScoped},
		{"revoked key", testRevoked},
		{"health", testHealth},
		{"viewports", testViewports},
	}
	for _, sc := range scenarios {
		ok := t.Run(sc.name, func(t *testing.T) {
			s.b.t = t
			defer s.b.guard.check(t)
			sc.run(t, s)
		})
		if !ok {
			break // later scenarios build on this one
		}
	}
	s.b.t = t
	if len(s.b.guard.sent("/v1/schema")) == 0 {
		t.Error("the guard saw no request for /v1/schema: it does not see the console's requests")
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "level=") {
		t.Error("the server logged nothing: the log check sees nothing")
	}
	for name, k := range e.keys {
		if strings.Contains(logs, k) {
			t.Errorf("the server's log holds the %s key", name)
		}
	}
}

func testSignIn(t *testing.T, s *session) {
	tb := s.b.newTab("admin")
	s.admin = tb
	tb.open(s.e)
	label := eval[string](tb, "read the key label", `(() => {
		const i = document.querySelector("#key-input");
		return i.type + " " + [...(i.labels ?? [])].map(l => l.textContent).join(" ") + " " + (i.getAttribute("aria-label") ?? "");
	})()`)
	if !strings.HasPrefix(label, "password ") || !strings.Contains(label, "API key") {
		t.Errorf("#key-input is %q: want a password input labelled \"API key\"", label)
	}
	tb.do("sign in with a wrong key",
		chromedp.SendKeys("#key-input", "pb_not-a-key"),
		chromedp.Click("#key-submit"),
		chromedp.WaitVisible("#key-error"))
	if tb.usable("#signout") {
		t.Error("a wrong key signed in")
	}
	// With the keyboard alone: the key, then Enter.
	tb.fill("#key-input", s.e.keys[adminKey]+kb.Enter)
	tb.do("sign in", chromedp.WaitVisible("#signout"))
	stored := eval[string](tb, "read the stored key", `sessionStorage.getItem("protobase.key") ?? ""`)
	if stored != s.e.keys[adminKey] {
		t.Error("the key is not in sessionStorage under protobase.key")
	}
	elsewhere := eval[string](tb, "read the other stores",
		`JSON.stringify(localStorage) + document.cookie + location.href + JSON.stringify(history.state)`)
	if strings.Contains(elsewhere, s.e.keys[adminKey]) {
		t.Error("the key is kept outside sessionStorage (localStorage, a cookie, the URL or the history)")
	}
	tb.screenshot("signed-in")
}

func testTypes(t *testing.T, s *session) {
	tb := s.admin
	tb.route("#/types")
	row := fmt.Sprintf(`table#types tr[data-type=%s]`, js(itemType))
	tb.waitFor("the type's row and count", fmt.Sprintf(
		`(document.querySelector(%s)?.textContent ?? "").replace(/\D/g, "") === "%d"`, js(row+" .count"), itemCount))
	if pk := tb.text(row + " .pk"); !strings.Contains(pk, "id") {
		t.Errorf("primary key cell %q does not name id", pk)
	}
	if f := tb.text(row + " .fields"); !strings.Contains(f, "price") || !strings.Contains(f, "category") {
		t.Errorf("fields cell %q does not list price and category", f)
	}
	tb.waitFor("the index states", fmt.Sprintf(`document.querySelector(%s)?.dataset.state === "READY"`,
		js(row+` .indexes span.index[data-index="by_price"]`)))
	if n := eval[int](tb, "count the types", `document.querySelectorAll("table#types tr[data-type]").length`); n != 2 {
		t.Errorf("%d types listed, want 2", n)
	}
	if src := tb.text("#schema-source"); !strings.Contains(src, "message Item") || !strings.Contains(src, "message Secret") {
		t.Errorf("#schema-source does not hold both files: %q", src)
	}
	if tb.usable("#schema-apply") {
		t.Error("#schema-apply is enabled before a plan was shown")
	}
	tb.screenshot("types")
	testSchemaPlan(t, s)
	tb.screenshot("types-schema-applied")
}

// testSchemaPlan adds a field in #schema-edit, asks for the plan, and
// applies it: the server then has the field.
func testSchemaPlan(t *testing.T, s *session) {
	tb := s.admin
	edited := eval[string](tb, "add a field", `(() => {
		const ta = document.querySelector("#schema-edit");
		ta.value = ta.value.replace("string category = 4;", "string category = 4;\n  string colour = 5;");
		ta.dispatchEvent(new Event("input", {bubbles: true}));
		return ta.value;
	})()`)
	if !strings.Contains(edited, "colour = 5") {
		t.Fatalf("#schema-edit does not hold shop.Item's source to edit: %q", edited)
	}
	tb.do("plan", chromedp.Click("#schema-plan"))
	tb.waitFor("the plan", `/colour/.test(document.querySelector("#schema-plan-output")?.textContent ?? "")`)
	if has(t, s, "colour") {
		t.Fatal("the plan (a dry run) changed the schema")
	}
	tb.waitFor("apply enabled", `!document.querySelector("#schema-apply").disabled`)
	tb.do("apply", chromedp.Click("#schema-apply"))
	deadline := time.Now().Add(stepTimeout)
	for !has(t, s, "colour") {
		if time.Now().After(deadline) {
			t.Fatal("applying the plan did not add the field")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// has reports whether the server's schema source mentions word.
func has(t *testing.T, s *session, word string) bool {
	resp, err := s.e.ts.C.GetSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range resp.Files {
		if strings.Contains(src, word) {
			return true
		}
	}
	return false
}

func testPages(t *testing.T, s *session) {
	tb := s.admin
	ids := itemsWhere(all, byID)
	tb.route("#/records/" + itemType)
	tb.waitRows("page 1", ids[:pageSize], 1)
	if tb.usable("#prev-page") {
		t.Error("#prev-page is enabled on page 1")
	}
	tokens := len(pageTokens(s))
	tb.page("#next-page")
	tb.waitRows("page 2", ids[pageSize:2*pageSize], 2)
	if len(pageTokens(s)) <= tokens {
		t.Error("page 2 was not asked for with the continuation token of page 1")
	}
	tb.page("#next-page")
	tb.waitRows("page 3", ids[2*pageSize:3*pageSize], 3)
	tb.page("#prev-page")
	tb.waitRows("back to page 2", ids[pageSize:2*pageSize], 2)
	tb.page("#prev-page")
	tb.waitRows("back to page 1", ids[:pageSize], 1)
	tb.screenshot("records")
}

// pageTokens are the page tokens of the Query requests sent so far.
func pageTokens(s *session) []string {
	var out []string
	for _, r := range s.b.guard.sent("/v1/query") {
		var req struct {
			PageToken  string `json:"pageToken"`
			PageToken2 string `json:"page_token"`
		}
		if json.Unmarshal([]byte(r.Body), &req) == nil && req.PageToken+req.PageToken2 != "" {
			out = append(out, req.PageToken+req.PageToken2)
		}
	}
	return out
}

func testFilter(t *testing.T, s *session) {
	tb := s.admin
	cheap := itemsWhere(func(it item) bool { return it.Price <= 10 }, byID)
	if len(cheap) != 2*pageSize {
		t.Fatalf("the seed has %d items of price <= 10, want %d", len(cheap), 2*pageSize)
	}
	tb.fill("#filter-input", "price <= 10")
	tb.do("filter", chromedp.Click("#filter-apply"))
	tb.waitRows("filtered page 1", cheap[:pageSize], 1)
	tb.page("#next-page")
	tb.waitRows("filtered page 2", cheap[pageSize:], 2)
	tb.waitFor("last page", `document.querySelector("#next-page").disabled`)

	const bad = `price <= 10 and title = "x"` // title: column 17
	tb.fill("#filter-input", bad)
	tb.do("bad filter", chromedp.Click("#filter-apply"))
	tb.do("filter error", chromedp.WaitVisible("#filter-error"))
	col := eval[string](tb, "read the column", `document.querySelector("#filter-error").dataset.column ?? ""`)
	if col != "17" {
		t.Errorf("#filter-error names column %q, want 17 (title): %q", col, tb.text("#filter-error"))
	}
	if msg := tb.text("#filter-error"); !strings.Contains(msg, "title") {
		t.Errorf("#filter-error %q does not name the field", msg)
	}
	caret := eval[int](tb, "read the caret", `document.querySelector("#filter-input").selectionStart`)
	if caret != 16 {
		t.Errorf("caret at %d, want 16 (before column 17)", caret)
	}
	tb.screenshot("records-filter-error")
	tb.fill("#filter-input", "")
	tb.do("clear the filter", chromedp.Click("#filter-apply"))
	tb.waitRows("unfiltered", itemsWhere(all, byID)[:pageSize], 1)
	if tb.usable("#filter-error") {
		t.Error("#filter-error stays after a good filter")
	}
}

func testSort(t *testing.T, s *session) {
	tb := s.admin
	opts := eval[[]string](tb, "read the orders", `[...document.querySelectorAll("#order-select option")].map(o => o.value)`)
	if !slices.Equal(opts, []string{"", "by_price", "category"}) && !slices.Equal(opts, []string{"", "category", "by_price"}) {
		t.Errorf("#order-select offers %q, want the primary key, by_price and category", opts)
	}
	byPriceIDs := itemsWhere(all, byPrice)
	// Choosing an order reloads the rows, as a new filter does.
	tb.choose("#order-select", "by_price")
	tb.waitRows("sorted page 1", byPriceIDs[:pageSize], 1)
	tb.page("#next-page")
	tb.waitRows("sorted page 2", byPriceIDs[pageSize:2*pageSize], 2)
	tb.screenshot("records-sorted")
	tb.choose("#order-select", "")
	tb.waitRows("key order", itemsWhere(all, byID)[:pageSize], 1)
}

// openRow clicks the a.open link of the row of id on the records page
// and waits for the record.
func (tb *tab) openRow(id int64) {
	tb.b.t.Helper()
	tb.do(fmt.Sprintf("open record %d", id), chromedp.Click(fmt.Sprintf(
		`table#records tr[data-key='["%d"]'] a.open, table#records tr[data-key='[%d]'] a.open`, id, id)))
	tb.waitFor("the record", fmt.Sprintf(`(() => {
		try { return String(JSON.parse(document.querySelector("#record-json").value).id) === "%d"; }
		catch (e) { return false; }
	})()`, id))
}

func testOpenRecord(t *testing.T, s *session) {
	tb := s.admin
	tb.openRow(1)
	rec := tb.recordJSON()
	if rec["name"] != "item-00001" || fmt.Sprint(rec["price"]) != fmt.Sprint(seedItem(1).Price) {
		t.Errorf("record 1 shows %v", rec)
	}
	if got, want := tb.text("#record-version"), fmt.Sprint(version(t, s, 1)); got != want {
		t.Errorf("#record-version %q, want %s", got, want)
	}
	if !strings.HasPrefix(eval[string](tb, "read the route", "location.hash"), "#/record/"+itemType+"/") {
		t.Error("the record's route is not #/record/<type>/<key>")
	}
	tb.screenshot("record")
}

// stored returns item id as stored, and its version.
func stored(t *testing.T, s *session, id int64) (map[string]any, uint64) {
	t.Helper()
	recs, vers, err := s.e.ts.C.GetVersioned(context.Background(), itemType, id)
	if err != nil || recs[0] == nil {
		t.Fatalf("get item %d: %v", id, err)
	}
	js, err := s.e.ts.C.JSON(context.Background(), recs[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	return m, vers[0]
}

func version(t *testing.T, s *session, id int64) uint64 {
	_, v := stored(t, s, id)
	return v
}

func testEdit(t *testing.T, s *session) {
	tb := s.admin
	before := version(t, s, 1)
	tb.setRecordField("name", "edited in the console")
	tb.do("save", chromedp.Click("#record-save"))
	tb.waitFor("saved", `/saved/i.test(document.querySelector("#record-status")?.textContent ?? "")`)
	rec, after := stored(t, s, 1)
	if rec["name"] != "edited in the console" || after <= before {
		t.Fatalf("after the save the server has %v at version %d (was %d)", rec, after, before)
	}
	if got := tb.text("#record-version"); got != fmt.Sprint(after) {
		t.Errorf("#record-version %q after the save, want %d", got, after)
	}
	tb.screenshot("record-saved")
	s.watch.waitFor("the edit in the tail", `[...document.querySelectorAll("ol#changes li[data-op]")].some(li =>
		li.dataset.type === "shop.Item" && /edited in the console/.test(li.textContent) &&
		["UPDATE", "UPSERT"].includes(li.dataset.op))`)
	if keys := s.watch.changeKeys(itemType); !slices.Equal(keys, []string{"1"}) {
		t.Errorf("the tail shows changes of %v, want item 1 once", keys)
	}
	s.watch.screenshot("changes")
}

func testConflict(t *testing.T, s *session) {
	first, second := s.admin, s.b.newTab("admin-2")
	second.signIn(s.e, adminKey)
	for _, tb := range []*tab{first, second} {
		tb.route("#/records/" + itemType)
		tb.waitRows("page 1", itemsWhere(all, byID)[:pageSize], 1)
		tb.openRow(2)
	}
	first.setRecordField("name", "first")
	second.setRecordField("name", "second")
	first.do("save", chromedp.Click("#record-save"))
	first.waitFor("saved", `/saved/i.test(document.querySelector("#record-status")?.textContent ?? "")`)
	second.do("save", chromedp.Click("#record-save"))
	second.waitFor("refused", `document.querySelector("#record-status")?.dataset.code === "ABORTED"`)
	if rec, _ := stored(t, s, 2); rec["name"] != "first" {
		t.Fatalf("after the refused save the server has %v, want the first save's name", rec)
	}
	if msg := second.text("#record-status"); strings.Contains(strings.ToLower(msg), "saved") {
		t.Errorf("#record-status of the refused save reads %q", msg)
	}
	second.screenshot("record-conflict")
}

func testInsertDelete(t *testing.T, s *session) {
	tb := s.admin
	tb.route("#/records/" + itemType)
	tb.do("new record", chromedp.Click("#new-record"), chromedp.WaitVisible("#record-json"))
	for field, v := range map[string]string{"id": "10001", "name": "inserted", "price": "5", "category": "z"} {
		tb.setRecordField(field, v)
	}
	tb.do("insert", chromedp.Click("#record-save"))
	tb.waitFor("inserted", `/saved/i.test(document.querySelector("#record-status")?.textContent ?? "")`)
	if rec, _ := stored(t, s, 10001); rec["name"] != "inserted" {
		t.Fatalf("after the insert the server has %v", rec)
	}
	tb.waitFor("the inserted record", `/inserted/.test(document.querySelector("#record-json")?.value ?? "")`)
	tb.do("delete", chromedp.Click("#record-delete"))
	tb.waitFor("deleted", `/deleted/i.test(document.querySelector("#record-status")?.textContent ?? "")`)
	recs, err := s.e.ts.C.Get(t.Context(), itemType, int64(10001))
	if err != nil || recs[0] != nil {
		t.Fatalf("after the delete the server has %v (%v)", recs, err)
	}
	for _, op := range []string{"INSERT", "REMOVE"} {
		s.watch.waitFor(op+" in the tail", fmt.Sprintf(`[...document.querySelectorAll("ol#changes li[data-op=%s]")].some(li =>
			li.dataset.type === "shop.Item" && JSON.parse(li.dataset.key).map(String).join() === "10001")`, op))
	}
}

func testReadOnly(t *testing.T, s *session) {
	tb := s.b.newTab("reader")
	tb.signIn(s.e, readerKey)
	tb.route("#/records/" + itemType)
	tb.waitRows("page 1", itemsWhere(all, byID)[:pageSize], 1)
	if tb.usable("#new-record") {
		t.Error("#new-record is offered to a read-only key")
	}
	tb.openRow(3)
	for _, sel := range []string{"#record-save", "#record-delete"} {
		if tb.usable(sel) {
			t.Errorf("%s is offered to a read-only key", sel)
		}
	}
	tb.screenshot("record-read-only")
	before, v := stored(t, s, 3)
	// A write forced past the page, with the key the tab holds.
	code := eval[int](tb, "force a write", fmt.Sprintf(`fetch("/v1/records:update", {
		method: "POST",
		headers: {"Authorization": "Bearer " + sessionStorage.getItem("protobase.key"), "Content-Type": "application/x-ndjson"},
		body: JSON.stringify({records: [{"@type": "type.googleapis.com/%s", "id": "3", "name": "forced"}]}) + "\n",
	}).then(r => r.status)`, itemType))
	if code != 403 {
		t.Errorf("a forced write with the read-only key answered HTTP %d, want 403", code)
	}
	if after, v2 := stored(t, s, 3); after["name"] != before["name"] || v2 != v {
		t.Errorf("the forced write changed item 3: %v", after)
	}
	tb.route("#/types")
	tb.do("types", chromedp.WaitVisible(fmt.Sprintf(`table#types tr[data-type=%s]`, js(itemType))))
	if tb.usable("#schema-apply") || tb.usable("#schema-plan") {
		t.Error("schema changes are offered to a read-only key")
	}
}

func testScoped(t *testing.T, s *session) {
	tb := s.b.newTab("scoped")
	tb.signIn(s.e, scopedKey)
	tb.route("#/types")
	tb.do("types", chromedp.WaitVisible(fmt.Sprintf(`table#types tr[data-type=%s]`, js(itemType))))
	if n := eval[int](tb, "look for the secret type", fmt.Sprintf(
		`document.querySelectorAll(%s).length`, js(fmt.Sprintf("table#types tr[data-type=%q]", secretType)))); n != 0 {
		t.Errorf("the types page shows %s to a key scoped to %s", secretType, itemType)
	}
	if src := tb.text("#schema-source"); strings.Contains(src, "Secret") {
		t.Errorf("#schema-source shows the out-of-scope file: %q", src)
	}
	if tb.usable("#schema-plan") || tb.usable("#schema-apply") {
		t.Error("schema changes are offered to a write key")
	}
	tb.screenshot("types-scoped")
	tb.route("#/records/" + secretType)
	// The server refuses the type (PERMISSION_DENIED); a console that
	// knows from the key's schema that the type is out of its sight may
	// say so without asking.
	tb.waitFor("a permission error", `!!document.querySelector("[data-code='PERMISSION_DENIED']") ||
		/permission|sees no record type/i.test(document.querySelector("main")?.textContent ?? "")`)
	if n := eval[int](tb, "count rows", `document.querySelectorAll("table#records tr[data-key]").length`); n != 0 {
		t.Errorf("the scoped key sees %d rows of %s", n, secretType)
	}
	if strings.Contains(eval[string](tb, "read the page", "document.body.textContent"), "secret 1") {
		t.Errorf("the page shows a record of %s to a key scoped to %s", secretType, itemType)
	}
	tb.screenshot("records-denied")
	tb.do("sign out", chromedp.Click("#signout"), chromedp.WaitVisible("#key-input"))
	if k := eval[string](tb, "read the stored key", `sessionStorage.getItem("protobase.key") ?? ""`); k != "" {
		t.Error("the tab keeps the key after signing out")
	}
}

// testRevoked revokes the key a tab signed in with: the next page the
// tab asks for takes it back to the sign-in form, and the tab forgets the
// key.
func testRevoked(t *testing.T, s *session) {
	tb := s.b.newTab("revoked")
	tb.signIn(s.e, revokedKey)
	tb.route("#/types")
	tb.do("types", chromedp.WaitVisible(fmt.Sprintf(`table#types tr[data-type=%s]`, js(itemType))))
	if err := s.e.ts.C.RevokeKey(t.Context(), revokedKey); err != nil {
		t.Fatal(err)
	}
	tb.route("#/records/" + itemType)
	tb.do("back to sign-in", chromedp.WaitVisible("#key-input"))
	if tb.usable("#signout") {
		t.Error("the tab still offers to sign out after its key was revoked")
	}
	if k := eval[string](tb, "read the stored key", `sessionStorage.getItem("protobase.key") ?? ""`); k != "" {
		t.Error("the tab keeps a revoked key in sessionStorage")
	}
	tb.screenshot("signin-revoked")
}

func testHealth(t *testing.T, s *session) {
	tb := s.admin
	// Rates and latencies cover the last refresh interval: the page shows
	// numbers for them while the server writes and reads.
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(0); ctx.Err() == nil; i++ {
			it := seedItem(200 + i%50)
			it.Name = fmt.Sprintf("load-%d", i)
			_, _ = s.e.ts.Write(pb.WriteOp_WRITE_OP_UPDATE, []*anypb.Any{s.e.ts.Rec(itemType, it.json())})
			_, _ = s.e.ts.C.Get(ctx, itemType, it.ID)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { stop(); <-done }()
	tb.route("#/health")
	for _, m := range []string{"write-rate", "read-rate", "latency-p50", "latency-p99", "storage-bytes"} {
		tb.waitFor(m, fmt.Sprintf(`/\d/.test(document.querySelector('[data-metric=%s]')?.textContent ?? "")`, js(m)))
	}
	tb.do("builds and backups", chromedp.WaitReady("#builds"), chromedp.WaitReady("#backups"))
	tb.screenshot("health")
}

// testViewports renders each page at 1280×800 and at a phone's 390×844,
// saves each, and checks that none is wider than the screen.
func testViewports(t *testing.T, s *session) {
	pages := []struct{ name, route, ready string }{
		{"types", "#/types", fmt.Sprintf("table#types tr[data-type=%s]", js(itemType))},
		{"records", "#/records/" + itemType, "table#records tr[data-key]"},
		{"record", "", "#record-json"}, // opened from the records page
		{"changes", "#/changes", "#watch-start"},
		{"health", "#/health", "[data-metric=write-rate]"},
	}
	signin := s.b.newTab("signin")
	for _, size := range [][2]int64{desktop, phone} {
		suffix := fmt.Sprintf("-%dx%d", size[0], size[1])
		signin.do("viewport", chromedp.EmulateViewport(size[0], size[1]))
		signin.open(s.e)
		signin.screenshot("signin" + suffix)
		s.admin.do("viewport", chromedp.EmulateViewport(size[0], size[1]))
		for _, p := range pages {
			if p.route == "" {
				s.admin.openRow(1)
			} else {
				s.admin.route(p.route)
			}
			s.admin.do(p.name, chromedp.WaitVisible(p.ready))
			s.admin.screenshot(p.name + suffix)
			w := eval[int](s.admin, "page width", "document.documentElement.scrollWidth")
			if w > int(size[0]) {
				t.Errorf("%s at %dx%d is %d px wide", p.name, size[0], size[1], w)
			}
			if size == desktop {
				if bare := s.admin.unnamedControls(); len(bare) > 0 {
					t.Errorf("%s: controls without a label or name: %q", p.name, bare)
				}
				if low := s.admin.lowContrast(); len(low) > 0 {
					t.Errorf("%s: text below WCAG AA contrast: %q", p.name, low)
				}
				if keys := s.admin.unreachable(); len(keys) > 0 {
					t.Errorf("%s: controls out of the keyboard's reach: %q", p.name, keys)
				}
			}
		}
	}
}

// TestConsoleWithoutKeys signs in to a server without API keys with an
// empty key: the console then sends no Authorization header at all.
func TestConsoleWithoutKeys(t *testing.T) {
	chromiumPath(t)
	ts := servertest.New(t, server.Config{HTTPAddr: "127.0.0.1:0", NoSync: true})
	ts.MustApply(map[string]string{"shop/items.proto": itemsProto})
	e := &env{ts: ts, base: "http://" + ts.Srv.HTTPAddr(), keys: map[string]string{"none": ""}}
	b := startBrowser(t, ts.Srv.HTTPAddr(), nil)
	tb := b.newTab("no keys")
	tb.open(e)
	tb.do("sign in with no key", chromedp.Click("#key-submit"), chromedp.WaitVisible("#signout"))
	tb.route("#/types")
	tb.do("types", chromedp.WaitVisible(fmt.Sprintf(`table#types tr[data-type=%s]`, js(itemType))))
	if tb.usable("#key-error") {
		t.Error("an empty key shows #key-error on a server without keys")
	}
	for _, r := range b.guard.sent("/v1/schema") {
		if r.Authorization {
			t.Errorf("%s %s carries an Authorization header without a key", r.Method, r.URL)
		}
	}
	if len(b.guard.sent("/v1/schema")) == 0 {
		t.Error("the console did not ask for the schema")
	}
	b.guard.check(t)
}
