package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/protobase/protobase/server"
)

// rawRequest sends one request with exactly the given headers (Host among
// them) and returns the response status, headers and body.
func rawRequest(t *testing.T, addr, method, path, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// wantStatusJSON checks that body is a google.rpc.Status with code.
func wantStatusJSON(t *testing.T, body string, code int) {
	t.Helper()
	var st struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Code != code || st.Message == "" {
		t.Fatalf("body %q is not a Status with code %d", body, code)
	}
}

// schemaTypes returns how many record types the server holds.
func schemaTypes(t *testing.T, ts *testServer) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := ts.C.GetSchema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Types)
}

// dropAll is the body of an ApplySchema that drops every type.
const dropAll = `{"files": {}, "allowDrop": ["shop.User", "shop.Order"]}`

// The attacks a web page can make a browser send to a gateway it can
// reach are refused before the API sees them, and nothing changes.
func TestRESTRefusesCrossSiteRequests(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	addr := ts.Srv.HTTPAddr()
	_, port, _ := net.SplitHostPort(addr)
	before := schemaTypes(t, ts)
	if before == 0 {
		t.Fatal("no types to protect")
	}
	const (
		permissionDenied = 7
		invalidArgument  = 3
	)
	cases := []struct {
		name       string
		hdr        map[string]string
		wantHTTP   int
		wantStatus int
	}{
		// The exact attack: a cross-site form-like POST from a
		// page whose name was re-pointed at the gateway.
		{"issue attack", map[string]string{"Content-Type": "text/plain", "Host": "evil.example:" + port, "Origin": "http://evil.example:" + port},
			http.StatusMisdirectedRequest, permissionDenied},
		{"foreign origin", map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"},
			http.StatusForbidden, permissionDenied},
		{"null origin", map[string]string{"Content-Type": "application/json", "Origin": "null"},
			http.StatusForbidden, permissionDenied},
		{"cross-site without origin", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
			http.StatusForbidden, permissionDenied},
		{"rebound host", map[string]string{"Content-Type": "application/json", "Host": "evil.example:" + port},
			http.StatusMisdirectedRequest, permissionDenied},
		{"text/plain", map[string]string{"Content-Type": "text/plain"},
			http.StatusUnsupportedMediaType, invalidArgument},
		{"form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			http.StatusUnsupportedMediaType, invalidArgument},
		{"multipart", map[string]string{"Content-Type": "multipart/form-data; boundary=x"},
			http.StatusUnsupportedMediaType, invalidArgument},
		{"no content type", map[string]string{},
			http.StatusUnsupportedMediaType, invalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := rawRequest(t, addr, http.MethodPost, "/v1/schema:apply", dropAll, tc.hdr)
			if code != tc.wantHTTP {
				t.Fatalf("HTTP %d, want %d: %s", code, tc.wantHTTP, body)
			}
			wantStatusJSON(t, body, tc.wantStatus)
			if n := schemaTypes(t, ts); n != before {
				t.Fatalf("schema has %d types after the refused request, want %d", n, before)
			}
		})
	}
	// A form POST to a GET route is not served as the GET either.
	code, _, _ := rawRequest(t, addr, http.MethodPost, "/v1/schema", "a=b", map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if code != http.StatusMethodNotAllowed {
		t.Fatalf("form POST to /v1/schema: %d, want 405", code)
	}
	// The same request done properly goes through (and drops the types).
	code, _, body := rawRequest(t, addr, http.MethodPost, "/v1/schema:apply", dropAll, map[string]string{"Content-Type": "application/json; charset=utf-8"})
	if code != http.StatusOK || schemaTypes(t, ts) != 0 {
		t.Fatalf("same-host JSON apply: %d %s", code, body)
	}
}

func TestRESTHostsServed(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true, HTTPAllowedHosts: []string{"DB.internal"}})
	_, port, _ := net.SplitHostPort(ts.Srv.HTTPAddr())
	for host, want := range map[string]int{
		"127.0.0.1:" + port:   http.StatusOK,
		"localhost:" + port:   http.StatusOK,
		"LOCALHOST":           http.StatusOK,
		"[::1]:" + port:       http.StatusOK,
		"10.1.2.3:" + port:    http.StatusOK, // an IP literal cannot be rebound
		"db.internal:" + port: http.StatusOK,
		"db.internal":         http.StatusOK,
		"other.internal":      http.StatusMisdirectedRequest,
		"localhost.":          http.StatusMisdirectedRequest,
		"127.0.0.1.nip.io":    http.StatusMisdirectedRequest,
	} {
		if code, _, body := rawRequest(t, ts.Srv.HTTPAddr(), http.MethodGet, "/v1/schema", "", map[string]string{"Host": host}); code != want {
			t.Errorf("Host %q: %d, want %d: %s", host, code, want, body)
		}
	}
}

func TestRESTCORSForAllowedOrigins(t *testing.T) {
	const app = "https://app.example"
	ts := startTransports(t, server.Config{NoSync: true, HTTPAllowedOrigins: []string{app + "/"}})
	addr := ts.Srv.HTTPAddr()
	preflight := map[string]string{"Origin": app, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
	code, h, _ := rawRequest(t, addr, http.MethodOptions, "/v1/schema:apply", "", preflight)
	if code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(h.Get("Vary"), "Origin") {
		t.Fatalf("preflight from an allowed origin: %d %v", code, h)
	}
	preflight["Origin"] = "https://evil.example"
	if code, h, body := rawRequest(t, addr, http.MethodOptions, "/v1/schema:apply", "", preflight); code != http.StatusForbidden || h.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: %d %v %s", code, h, body)
	}
	code, h, body := rawRequest(t, addr, http.MethodPost, "/v1/query", `{"query": {"type": "shop.User"}}`,
		map[string]string{"Origin": app, "Content-Type": "application/json"})
	if code != http.StatusOK || h.Get("Access-Control-Allow-Origin") != app {
		t.Fatalf("query from an allowed origin: %d %v %s", code, h, body)
	}
	// Even an allowed origin must send JSON.
	if code, _, _ := rawRequest(t, addr, http.MethodPost, "/v1/schema:apply", dropAll, map[string]string{"Origin": app, "Content-Type": "text/plain"}); code != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain from an allowed origin: %d, want 415", code)
	}
}

func TestRESTWrongMethodIs405(t *testing.T) {
	ts := startTransports(t, server.Config{NoSync: true})
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodGet, "/v1/schema:apply", "POST, OPTIONS"},
		{http.MethodDelete, "/v1/schema", "GET, OPTIONS"},
		{http.MethodPut, "/v1/records:insert", "POST, OPTIONS"},
		{http.MethodGet, "/v1/search", "POST, OPTIONS"},
		{http.MethodPost, "/openapi.json", "GET, HEAD, OPTIONS"},
	} {
		code, h, body := rawRequest(t, ts.Srv.HTTPAddr(), tc.method, tc.path, "", nil)
		if code != http.StatusMethodNotAllowed || h.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %q: %s", tc.method, tc.path, code, h.Get("Allow"), tc.allow, body)
			continue
		}
		wantStatusJSON(t, body, 12) // UNIMPLEMENTED
	}
	code, h, _ := rawRequest(t, ts.Srv.HTTPAddr(), http.MethodOptions, "/v1/schema", "", nil)
	if code != http.StatusNoContent || h.Get("Allow") != "GET, OPTIONS" {
		t.Errorf("OPTIONS /v1/schema: %d Allow %q", code, h.Get("Allow"))
	}
	if code, _, _ := rawRequest(t, ts.Srv.HTTPAddr(), http.MethodGet, "/v1/nothing", "", nil); code != http.StatusNotFound {
		t.Errorf("unknown path: %d, want 404", code)
	}
}
