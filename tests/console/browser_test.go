package console_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// stepTimeout bounds one step of a scenario (a navigation and what it
// waits for): a console that never shows what a step waits for fails
// the test with a screenshot instead of hanging it.
const stepTimeout = 20 * time.Second

// desktop and phone are the viewports the console is checked at.
var (
	desktop = [2]int64{1280, 800}
	phone   = [2]int64{390, 844}
)

// browser is one headless chromium process. Every tab it opens reports
// its requests and console messages to the same guard.
type browser struct {
	t     *testing.T      // the running (sub)test, which a failing step fails
	root  *testing.T      // the test whose cleanup closes the browser and tabs
	ctx   context.Context // the browser's; tabs derive from it
	guard *guard
	dir   string // where screenshots go
}

// chromiumPath is the chromium binary: $CHROMIUM, else Debian's
// `chromium` on the PATH.
func chromiumPath(t *testing.T) string {
	t.Helper()
	name := os.Getenv("CHROMIUM")
	if name == "" {
		name = "chromium"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		if testing.Short() {
			t.Skipf("chromium (%s) not found; -short skips the browser tests", name)
		}
		t.Fatalf("chromium (%s) not found: run `make chromium` (installs Debian's chromium with apt-get) or set CHROMIUM to a chromium binary: %v", name, err)
	}
	return path
}

// startBrowser starts headless chromium with a fresh profile; the test's
// cleanup stops it. Requests to any host but allowedHost fail the test.
func startBrowser(t *testing.T, allowedHost string, secrets []string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], // headless, quiet, no background requests
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1280, 800),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// The first Run starts the process.
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	b := &browser{t: t, root: t, ctx: bctx, guard: &guard{host: allowedHost, secrets: secrets}, dir: t.ArtifactDir()}
	t.Logf("screenshots in %s", b.dir)
	return b
}

// guard collects what every tab sends and logs, and names what breaks
// the console's promises: a request to another host, a key in a URL or
// in the console's log, an uncaught exception.
type guard struct {
	host    string
	secrets []string

	mu       sync.Mutex
	problems []string
	requests []request
}

// request is one request a tab sent.
type request struct {
	Method, URL, Body string
	Authorization     bool // whether it had an Authorization header
}

func (g *guard) add(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.problems = append(g.problems, fmt.Sprintf(format, args...))
}

// check fails the test with every problem seen so far.
func (g *guard) check(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.problems {
		t.Error(p)
	}
	g.problems = nil
}

// sent returns the requests seen so far whose URL path is path.
func (g *guard) sent(path string) []request {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []request
	for _, r := range g.requests {
		if u, err := url.Parse(r.URL); err == nil && u.Path == path {
			out = append(out, r)
		}
	}
	return out
}

func (g *guard) onRequest(ev *network.EventRequestWillBeSent) {
	raw := ev.Request.URL
	g.checkURL(ev.Request.Method, raw)
	var body strings.Builder
	for _, e := range ev.Request.PostDataEntries {
		body.Write(e.Bytes)
	}
	g.mu.Lock()
	_, auth := ev.Request.Headers["Authorization"]
	g.requests = append(g.requests, request{Method: ev.Request.Method, URL: raw, Body: body.String(), Authorization: auth})
	g.mu.Unlock()
}

// checkURL names a URL of another host than the server's, or one that
// holds a key.
func (g *guard) checkURL(method, raw string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		g.add("request to an unparseable URL %q", redact(raw, g.secrets))
	case u.Scheme == "data" || u.Scheme == "blob":
		// In the page's memory: not a network request.
	case u.Host != g.host || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ws" && u.Scheme != "wss"):
		g.add("the console requested %s, which is not the server (%s)", redact(raw, g.secrets), g.host)
	}
	for _, s := range g.secrets {
		if strings.Contains(raw, s) || strings.Contains(raw, url.QueryEscape(s)) {
			g.add("a request URL holds an API key: %s %s", method, redact(raw, g.secrets))
		}
	}
}

func (g *guard) onConsole(ev *runtime.EventConsoleAPICalled) {
	for _, a := range ev.Args {
		text := string(a.Value) + a.Description
		for _, s := range g.secrets {
			if strings.Contains(text, s) {
				g.add("the console logged an API key (console.%s)", ev.Type)
			}
		}
	}
}

func (g *guard) onException(ev *runtime.EventExceptionThrown) {
	d := ev.ExceptionDetails
	msg := d.Text
	if d.Exception != nil {
		msg += " " + d.Exception.Description
	}
	g.add("uncaught exception in the console at %s:%d: %s", d.URL, d.LineNumber, redact(msg, g.secrets))
}

// redact replaces each secret in s.
func redact(s string, secrets []string) string {
	for _, k := range secrets {
		s = strings.ReplaceAll(s, k, "<key>")
	}
	return s
}

// tab is one browser tab, signed in with at most one key.
type tab struct {
	b    *browser
	ctx  context.Context
	name string
}

// newTab opens a tab whose requests, console messages and exceptions the
// guard sees from the first request on; the test's cleanup closes it.
func (b *browser) newTab(name string) *tab {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithListener(func(ev any) {
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.guard.onRequest(ev)
		case *network.EventWebSocketCreated:
			b.guard.checkURL("WebSocket", ev.URL)
		case *runtime.EventConsoleAPICalled:
			b.guard.onConsole(ev)
		case *runtime.EventExceptionThrown:
			b.guard.onException(ev)
		}
	}))
	b.root.Cleanup(cancel)
	tb := &tab{b: b, ctx: ctx, name: name}
	// The first Run opens the tab, which lives as long as that Run's
	// context: tb.ctx, not a step's.
	// chromedp enables the network domain when it attaches a tab; enabling
	// it here again says what the listener depends on.
	// Every tab starts at the desktop size the screenshots are named for.
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.Enable, network.EnableParams{})
		return err
	}), chromedp.EmulateViewport(desktop[0], desktop[1])); err != nil {
		b.t.Fatalf("open tab %s: %v", name, err)
	}
	return tb
}

// do runs actions within stepTimeout; on failure it saves a screenshot
// named after the tab and the step, and fails the test.
func (tb *tab) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	tb.b.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	tb.failed(step, chromedp.Do(ctx, actions...))
}

// eval evaluates a JavaScript expression and decodes its value into T.
func eval[T any](tb *tab, step, expr string) T {
	tb.b.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	tb.failed(step, err)
	return v
}

// waitFor polls a JavaScript expression until it is truthy.
func (tb *tab) waitFor(step, expr string) {
	tb.b.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
	tb.failed(step, err)
}

// failed fails the test when err is not nil, with a screenshot of the tab.
func (tb *tab) failed(step string, err error) {
	if err == nil {
		return
	}
	tb.b.t.Helper()
	shot := tb.saveScreenshot("failed-" + slug(tb.name+"-"+step))
	tb.b.t.Fatalf("%s: %s: %v (screenshot %s)", tb.name, step, redact(err.Error(), tb.b.guard.secrets), shot)
}

// screenshot saves the whole page as name.png in the artifact directory.
func (tb *tab) screenshot(name string) {
	tb.b.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	tb.failed("screenshot "+name, err)
	path := filepath.Join(tb.b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.b.t.Fatal(err)
	}
}

// saveScreenshot is screenshot for a failing step: it returns the path,
// or why there is none, and never fails the test itself.
func (tb *tab) saveScreenshot(name string) string {
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return "none: " + err.Error()
	}
	path := filepath.Join(tb.b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return "none: " + err.Error()
	}
	return path
}

// slug makes s usable in a file name.
func slug(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
}
