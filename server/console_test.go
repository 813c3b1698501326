package server_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/console"
	"github.com/protobase/protobase/server"
)

// The console's assets are served on the HTTP listener without a key,
// behind the same Host check as the API; the metrics it reads are there
// too, with a key; and its own POSTs (Origin: the listener's own origin)
// reach the API, with the key's permissions.
func TestConsoleOnHTTPListener(t *testing.T) {
	e := startAuthServer(t, server.Config{})
	addr := e.ts.Srv.HTTPAddr()
	_, port, _ := net.SplitHostPort(addr)

	code, h, body := rawRequest(t, addr, http.MethodGet, "/console/", "", nil)
	if code != http.StatusOK || !strings.Contains(body, "main.js") ||
		h.Get("Content-Security-Policy") != console.ContentSecurityPolicy || h.Get("X-Content-Type-Options") != "nosniff" ||
		h.Get("Referrer-Policy") != "no-referrer" || h.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /console/ without a key: %d %v", code, h)
	}
	if code, h, _ := rawRequest(t, addr, http.MethodHead, "/console/main.js", "", nil); code != http.StatusOK ||
		h.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("HEAD /console/main.js: %d %v", code, h)
	}
	if code, h, _ := rawRequest(t, addr, http.MethodGet, "/console", "", nil); code != http.StatusOK || h.Get("Content-Security-Policy") == "" {
		// The client follows the redirect to /console/.
		t.Fatalf("GET /console: %d %v", code, h)
	}
	if code, _, _ := rawRequest(t, addr, http.MethodGet, "/console/missing.js", "", nil); code != http.StatusNotFound {
		t.Fatalf("GET /console/missing.js: %d, want 404", code)
	}
	code, _, body = rawRequest(t, addr, http.MethodGet, "/console/", "", map[string]string{"Host": "evil.example:" + port})
	if code != http.StatusMisdirectedRequest {
		t.Fatalf("GET /console/ with a rebound Host: %d, want 421: %s", code, body)
	}

	if code, _, _ := rawRequest(t, addr, http.MethodGet, "/metrics", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without a key: %d, want 401", code)
	}
	code, _, body = rawRequest(t, addr, http.MethodGet, "/metrics", "", map[string]string{"Authorization": "Bearer " + e.keys["reader"]})
	if code != http.StatusOK || !strings.Contains(body, "protobase_write_records_total") {
		t.Fatalf("GET /metrics with a key: %d", code)
	}
	if code, _, _ := rawRequest(t, addr, http.MethodGet, "/metrics", "", map[string]string{"Host": "evil.example",
		"Authorization": "Bearer " + e.keys["reader"]}); code != http.StatusMisdirectedRequest {
		t.Fatalf("GET /metrics with a rebound Host: %d, want 421", code)
	}

	own := "http://127.0.0.1:" + port
	query := `{"query": {"type": "shop.User", "count": true}}`
	post := func(key, origin string) (int, string) {
		code, _, body := rawRequest(t, addr, http.MethodPost, "/v1/query", query, map[string]string{
			"Content-Type": "application/json", "Origin": origin, "Authorization": "Bearer " + e.keys[key]})
		return code, body
	}
	if code, body := post("reader", own); code != http.StatusOK || !strings.Contains(body, `"count"`) {
		t.Fatalf("same-origin query: %d %s", code, body)
	}
	for _, origin := range []string{"http://127.0.0.1:1", "https://127.0.0.1:" + port, "http://localhost:" + port} {
		if code, _ := post("reader", origin); code != http.StatusForbidden {
			t.Errorf("query from Origin %s: %d, want 403", origin, code)
		}
	}
	// Same origin changes nothing about permissions.
	code, _, body = rawRequest(t, addr, http.MethodPost, "/v1/records:insert",
		`{"records": [`+jsonRecord("shop.User", `"id": "77", "name": "x", "email": "x@example.com"`)+`]}`,
		map[string]string{"Content-Type": "application/json", "Origin": own, "Authorization": "Bearer " + e.keys["reader"]})
	if code != http.StatusForbidden {
		t.Fatalf("same-origin insert with a read key: %d, want 403: %s", code, body)
	}
}
