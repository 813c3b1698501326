package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func serve(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandlerServesAssets(t *testing.T) {
	h := New()
	for _, c := range []struct {
		path, ctype, body string
	}{
		{"/console/", "text/html; charset=utf-8", `<script type="module" src="main.js">`},
		{"/console/index.html", "text/html; charset=utf-8", "<title>Protobase console</title>"},
		{"/console/main.js", "text/javascript; charset=utf-8", "import "},
		{"/console/console.css", "text/css; charset=utf-8", ":root"},
	} {
		w := serve(t, h, http.MethodGet, c.path, nil)
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != c.ctype || !strings.Contains(w.Body.String(), c.body) {
			t.Errorf("GET %s: %d %q, body without %q", c.path, w.Code, w.Header().Get("Content-Type"), c.body)
		}
		head := serve(t, h, http.MethodHead, c.path, nil)
		if head.Code != http.StatusOK || head.Body.Len() != 0 || head.Header().Get("Content-Length") != w.Header().Get("Content-Length") {
			t.Errorf("HEAD %s: %d, %d body bytes, length %q (GET: %q)", c.path, head.Code, head.Body.Len(),
				head.Header().Get("Content-Length"), w.Header().Get("Content-Length"))
		}
		if etag := w.Header().Get("ETag"); etag == "" {
			t.Errorf("GET %s: no ETag", c.path)
		} else if again := serve(t, h, http.MethodGet, c.path, map[string]string{"If-None-Match": etag}); again.Code != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", c.path, again.Code)
		}
	}
}

// Every answer, refusals included, carries the security headers.
func TestHandlerHeadersAndRefusals(t *testing.T) {
	h := New()
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/console/", http.StatusOK},
		{http.MethodGet, "/console", http.StatusMovedPermanently},
		{http.MethodGet, "/console/nothing.js", http.StatusNotFound},
		{http.MethodGet, "/console/src/main.ts", http.StatusNotFound},
		{http.MethodGet, "/console/../console/main.js", http.StatusNotFound},
		{http.MethodGet, "/console/assets/main.js", http.StatusNotFound},
		{http.MethodGet, "/consolex", http.StatusNotFound},
		{http.MethodPost, "/console/", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/console/main.js", http.StatusMethodNotAllowed},
	} {
		w := serve(t, h, c.method, c.path, nil)
		if w.Code != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, w.Code, c.want)
		}
		hd := w.Header()
		if hd.Get("Content-Security-Policy") != ContentSecurityPolicy || hd.Get("X-Content-Type-Options") != "nosniff" ||
			hd.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s %s: security headers %v", c.method, c.path, hd)
		}
		if c.want == http.StatusMovedPermanently && hd.Get("Location") != Prefix {
			t.Errorf("%s %s: Location %q, want %q", c.method, c.path, hd.Get("Location"), Prefix)
		}
		if c.want == http.StatusMethodNotAllowed && hd.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q", c.method, c.path, hd.Get("Allow"))
		}
	}
}

// The assets add little to the binary and load nothing from elsewhere:
// no absolute URL in a src, href, import or url(), and no inline script
// or style (the policy would refuse them).
func TestAssetsAreSmallAndSelfContained(t *testing.T) {
	h := New()
	if n := h.size(); n > 150<<10 {
		t.Errorf("assets are %d bytes, want under 150 KiB", n)
	}
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import|from\s+["'](https?:)?//|import\(\s*["'](https?:)?//`)
	inline := regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]|<style|\sstyle\s*=|\son[a-z]+\s*=`)
	err := fs.WalkDir(embedded, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(embedded, p)
		if err != nil {
			return err
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s refers to another host: %q", p, m)
		}
		if strings.HasSuffix(p, ".html") {
			if m := inline.Find(b); m != nil {
				t.Errorf("%s has inline script or style: %q", p, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
