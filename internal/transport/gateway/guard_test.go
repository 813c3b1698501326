package gateway

import (
	"crypto/tls"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/protobase/protobase/internal/transport/schemajson"
)

const guardSpec = `{"paths": {"/v1/schema:apply": {"post": {}}, "/v1/schema": {"get": {}}, "/v1/keys/{name}": {"delete": {}, "get": {}}}}`

func guardGateway(t testing.TB) *Gateway {
	gd, err := newGuard([]string{"https://app.example"}, []string{"db.internal"}, []byte(guardSpec))
	if err != nil {
		t.Fatal(err)
	}
	res := schemajson.New(func() *protoregistry.Files { return nil })
	return &Gateway{codec: newCodec(res, 1<<20, nil), guard: gd}
}

func TestGuardMethods(t *testing.T) {
	gd := guardGateway(t).guard
	for path, want := range map[string]string{
		"/v1/schema:apply": "POST",
		"/v1/schema":       "GET",
		"/v1/keys/alice":   "DELETE GET",
		"/v1/keys/":        "",
		"/v1/keys/a/b":     "",
		"/openapi.json":    "GET HEAD",
		"/v1/nothing":      "",
	} {
		if got := strings.Join(gd.methods(path), " "); got != want {
			t.Errorf("methods(%q) = %q, want %q", path, got, want)
		}
	}
}

// FuzzGuard checks what admit lets through, whatever the headers: never a
// Host that is a name other than localhost or an allowed one, never an
// Origin neither allowed nor the request's own, never a state-changing request without a JSON
// content type, never an OPTIONS or a method the path does not serve.
func FuzzGuard(f *testing.F) {
	f.Add("POST", "/v1/schema:apply", "evil.example:8080", "http://evil.example", "text/plain", "")
	f.Add("POST", "/v1/schema:apply", "127.0.0.1:8080", "", "application/json; charset=utf-8", "")
	f.Add("GET", "/v1/schema", "[::1]:8080", "https://APP.example/", "", "cross-site")
	f.Add("DELETE", "/v1/keys/x", "DB.internal", "null", "application/x-ndjson", "same-origin")
	f.Add("OPTIONS", "/v1/schema", "localhost", "https://app.example", "", "")
	f.Add("POST", "/v1/query", "127.0.0.1:8080", "http://127.0.0.1:8080", "application/json", "same-origin")
	f.Add("POST", "/v1/query", "evil.example:8080", "http://evil.example:8080", "application/json", "same-origin")
	g := guardGateway(f)
	f.Fuzz(func(t *testing.T, method, path, host, origin, ctype, fetchSite string) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " ?#\x00") {
			return
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Method, r.URL.Path, r.Host = method, path, host
		r.Header.Set("Origin", origin)
		r.Header.Set("Content-Type", ctype)
		r.Header.Set("Sec-Fetch-Site", fetchSite)
		w := httptest.NewRecorder()
		if !g.admit(w, r) {
			if w.Code < 200 || w.Code >= 500 {
				t.Fatalf("refusal with HTTP %d", w.Code)
			}
			return
		}
		h := hostOnly(host)
		if host != "" && h != "localhost" && net.ParseIP(h) == nil && h != "db.internal" {
			t.Fatalf("admitted Host %q", host)
		}
		if origin != "" && normOrigin(origin) != "https://app.example" && normOrigin(origin) != "http://"+strings.ToLower(host) {
			t.Fatalf("admitted Origin %q", origin)
		}
		if origin == "" && (fetchSite == "cross-site" || fetchSite == "same-site") {
			t.Fatal("admitted a cross-site request without an Origin")
		}
		if method == http.MethodOptions {
			t.Fatal("admitted OPTIONS to the API")
		}
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			mt, _, _ := mime.ParseMediaType(ctype)
			if mt != contentTypeJSON && mt != contentTypeNDJSON {
				t.Fatalf("admitted a %s with Content-Type %q", method, ctype)
			}
		}
		if ms := g.guard.methods(path); ms != nil && !strings.Contains(" "+strings.Join(ms, " ")+" ", " "+method+" ") {
			t.Fatalf("admitted %s on %s (serves %v)", method, path, ms)
		}
	})
}

// TestGuardSameOrigin: a request whose Origin is its own (the
// connection's scheme and the Host) is admitted without being listed;
// another port, scheme or host is not, nor is a Host that fails the Host
// check whatever the Origin says.
func TestGuardSameOrigin(t *testing.T) {
	g := guardGateway(t)
	for _, c := range []struct {
		name, host, origin string
		tls                bool
		want               int // 0: admitted
	}{
		{"same origin", "127.0.0.1:8080", "http://127.0.0.1:8080", false, 0},
		{"same origin, localhost", "localhost:8080", "http://LOCALHOST:8080/", false, 0},
		{"same origin over TLS", "db.internal:8443", "https://db.internal:8443", true, 0},
		{"same origin, IPv6", "[::1]:8080", "http://[::1]:8080", false, 0},
		{"configured origin", "127.0.0.1:8080", "https://app.example", false, 0},
		{"other port", "127.0.0.1:8080", "http://127.0.0.1:8081", false, http.StatusForbidden},
		{"other scheme", "127.0.0.1:8080", "https://127.0.0.1:8080", false, http.StatusForbidden},
		{"other scheme over TLS", "127.0.0.1:8443", "http://127.0.0.1:8443", true, http.StatusForbidden},
		{"other host", "127.0.0.1:8080", "http://localhost:8080", false, http.StatusForbidden},
		{"rebound name", "evil.example:8080", "http://evil.example:8080", false, http.StatusMisdirectedRequest},
		{"null origin", "127.0.0.1:8080", "null", false, http.StatusForbidden},
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/schema:apply", strings.NewReader("{}"))
		r.Host = c.host
		r.Header.Set("Origin", c.origin)
		r.Header.Set("Content-Type", contentTypeJSON)
		r.TLS = nil
		if c.tls {
			r.TLS = &tls.ConnectionState{}
		}
		w := httptest.NewRecorder()
		admitted := g.admit(w, r)
		switch {
		case c.want == 0 && !admitted:
			t.Errorf("%s: Host %q, Origin %q refused with %d: %s", c.name, c.host, c.origin, w.Code, w.Body)
		case c.want != 0 && admitted:
			t.Errorf("%s: Host %q, Origin %q admitted", c.name, c.host, c.origin)
		case c.want != 0 && w.Code != c.want:
			t.Errorf("%s: refused with %d, want %d", c.name, w.Code, c.want)
		}
	}
}

// validMethod reports whether m is an HTTP token, as net/http requires.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, c) {
			return false
		}
	}
	return true
}
