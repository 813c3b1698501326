package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestGuard checks the guard of the console tests on a page that breaks
// each of its rules: it must name a request and a WebSocket to another
// host, a key in a URL, a key in the console's log and an uncaught
// exception, and show the key nowhere in what it reports.
func TestGuard(t *testing.T) {
	const secret = "pb_secret-key-text"
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><p id="done">page</p>
<img src="http://192.0.2.1/pixel.png"><img src="/pixel.png?k=%s">
<script>console.log("key", %q); new WebSocket("ws://192.0.2.2/feed"); throw new Error("boom");</script></body></html>`, secret, secret)
	}))
	defer ts.Close()
	b := startBrowser(t, ts.Listener.Addr().String(), []string{secret})
	tb := b.newTab("guarded")
	tb.do("load", chromedp.Navigate(ts.URL), chromedp.WaitVisible("#done"))
	want := []string{"192.0.2.1/pixel.png", "ws://192.0.2.2/feed", "request URL holds an API key", "logged an API key", "boom"}
	deadline := time.Now().Add(stepTimeout)
	for {
		b.guard.mu.Lock()
		report := strings.Join(b.guard.problems, "\n")
		b.guard.mu.Unlock()
		missing := ""
		for _, w := range want {
			if !strings.Contains(report, w) {
				missing = w
			}
		}
		if missing == "" {
			if strings.Contains(report, secret) {
				t.Errorf("the guard's report shows the key:\n%s", report)
			}
			t.Logf("the guard reported:\n%s", report)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guard reported:\n%s\nnothing with %q", report, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPageChecks checks the accessibility checks of the console tests on
// a page with one fault of each kind beside correct elements.
func TestPageChecks(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><body style="background:#fff">
<p id="pale" style="color:#aaa">pale text</p><p id="dark" style="color:#222">dark text</p>
<h1 id="big" style="color:#888;font-size:32px">large grey</h1>
<div style="background:#000"><p id="light-on-dark" style="color:#eee">light on dark</p></div>
<button disabled style="color:#ddd">disabled</button>
<label>Named <input id="named"></label><input id="bare"><input aria-label="x" id="labelled">
<button id="empty"></button><button>Text</button><button id="mouse-only" tabindex="-1">Mouse</button></body></html>`)
	}))
	defer ts.Close()
	b := startBrowser(t, ts.Listener.Addr().String(), nil)
	tb := b.newTab("checks")
	tb.do("load", chromedp.Navigate(ts.URL), chromedp.WaitVisible("#dark"))
	low := tb.lowContrast()
	if len(low) != 1 || !strings.HasPrefix(low[0], "p#pale ") {
		t.Errorf("low contrast: %q, want p#pale alone (#aaa on white is 2.32:1)", low)
	}
	if bare := tb.unnamedControls(); !slices.Equal(bare, []string{"input#bare", "button#empty"}) {
		t.Errorf("unnamed controls: %q, want input#bare and button#empty", bare)
	}
	if keys := tb.unreachable(); !slices.Equal(keys, []string{"button#mouse-only"}) {
		t.Errorf("out of the tab order: %q, want button#mouse-only", keys)
	}
	b.guard.check(t)
}
