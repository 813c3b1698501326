package gateway

import (
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
	return &Gateway{codec: newCodec(res, 1<<20), guard: gd}
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
// Origin not allowed, never a state-changing request without a JSON
// content type, never an OPTIONS or a method the path does not serve.
func FuzzGuard(f *testing.F) {
	f.Add("POST", "/v1/schema:apply", "evil.example:8080", "http://evil.example", "text/plain", "")
	f.Add("POST", "/v1/schema:apply", "127.0.0.1:8080", "", "application/json; charset=utf-8", "")
	f.Add("GET", "/v1/schema", "[::1]:8080", "https://APP.example/", "", "cross-site")
	f.Add("DELETE", "/v1/keys/x", "DB.internal", "null", "application/x-ndjson", "same-origin")
	f.Add("OPTIONS", "/v1/schema", "localhost", "https://app.example", "", "")
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
		if origin != "" && normOrigin(origin) != "https://app.example" {
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
