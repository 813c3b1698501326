package gateway

import (
	"encoding/json"
	"fmt"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// guard refuses, before the API sees them, the requests a web page can
// make a browser send to a gateway it can reach (one on loopback or on the
// user's network), and answers CORS for the origins allowed:
//
//   - Host (DNS rebinding): a page on attacker.example whose name is
//     re-pointed at the gateway's address reaches it as same-origin, with
//     "Host: attacker.example". The Host must be an IP literal, localhost,
//     or one of AllowedHosts, else 421. An IP literal or localhost cannot
//     be rebound (no DNS answer decides where they lead), so they are
//     safe whatever address the listener has; names must be listed.
//   - Origin: a browser names the page's origin on every cross-origin
//     request and on every POST. A request is admitted when its Origin is
//     in AllowedOrigins or is the request's own origin (the scheme of the
//     connection, https with TLS and http without, and the Host), which is
//     how the web console served on this listener calls the API. Any other
//     Origin is refused with 403, as is a request that Sec-Fetch-Site marks
//     cross-site or same-site without an Origin. The own-origin rule relies
//     on the Host check before it: a rebound name never gets that far, so
//     a page of another site cannot pass for this one.
//   - Content-Type: a state-changing request (POST, PUT, PATCH, DELETE)
//     must be application/json or application/x-ndjson, else 415. A page
//     can send text/plain, form or multipart bodies without a CORS
//     preflight, but not JSON; so this refuses what the Origin check might
//     miss (an old browser, a proxy dropping the header).
//
// A refusal is a google.rpc.Status in JSON, as every gateway error.
type guard struct {
	origins map[string]bool // normalized by normOrigin
	hosts   map[string]bool // lower-case host names, without port
	routes  []route         // for Allow and preflights; from the OpenAPI description
}

// route is one path of the API and the methods it answers.
type route struct {
	segs    []string // "" matches any one segment ({param})
	methods []string
}

func newGuard(origins, hosts []string, spec []byte) (*guard, error) {
	gd := &guard{origins: map[string]bool{}, hosts: map[string]bool{}}
	for _, o := range origins {
		gd.origins[normOrigin(o)] = true
	}
	for _, h := range hosts {
		gd.hosts[hostOnly(h)] = true
	}
	if spec != nil {
		var doc struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		if err := json.Unmarshal(spec, &doc); err != nil {
			return nil, fmt.Errorf("gateway: read the OpenAPI description: %w", err)
		}
		for p, ops := range doc.Paths {
			rt := route{segs: splitPath(p)}
			for m := range ops {
				rt.methods = append(rt.methods, strings.ToUpper(m))
			}
			slices.Sort(rt.methods)
			gd.routes = append(gd.routes, rt)
		}
		gd.routes = append(gd.routes, route{segs: splitPath("/openapi.json"), methods: []string{http.MethodGet, http.MethodHead}})
	}
	return gd, nil
}

func splitPath(p string) []string {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i] = ""
		}
	}
	return segs
}

// methods returns the methods path answers, or nil for an unknown path.
func (gd *guard) methods(path string) []string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for _, rt := range gd.routes {
		if len(rt.segs) != len(segs) {
			continue
		}
		ok := true
		for i, s := range rt.segs {
			if s != "" && s != segs[i] || segs[i] == "" {
				ok = false
				break
			}
		}
		if ok {
			return rt.methods
		}
	}
	return nil
}

// admit answers or refuses r itself and returns false, or returns true to
// let it through to the API.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request) bool {
	gd := g.guard
	if h := hostOnly(r.Host); r.Host != "" && h != "localhost" && net.ParseIP(h) == nil && !gd.hosts[h] {
		g.refuse(w, http.StatusMisdirectedRequest, codes.PermissionDenied,
			fmt.Sprintf("host %q is not served here (allow it with --http-allowed-hosts)", r.Host))
		return false
	}
	origin := r.Header.Get("Origin")
	switch {
	case origin != "" && !gd.origins[normOrigin(origin)] && !sameOrigin(r, origin):
		g.refuse(w, http.StatusForbidden, codes.PermissionDenied,
			fmt.Sprintf("cross-origin request from %q refused (allow the origin with --http-allowed-origins)", origin))
		return false
	case origin == "" && (r.Header.Get("Sec-Fetch-Site") == "cross-site" || r.Header.Get("Sec-Fetch-Site") == "same-site"):
		g.refuse(w, http.StatusForbidden, codes.PermissionDenied, "cross-site request without an Origin refused")
		return false
	}
	if origin != "" {
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Add("Vary", "Origin")
	}
	if r.Method == http.MethodOptions {
		g.options(w, r)
		return false
	}
	if ms := gd.methods(r.URL.Path); ms != nil && !slices.Contains(ms, r.Method) {
		g.methodNotAllowed(w, r)
		return false
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if mt != contentTypeJSON && mt != contentTypeNDJSON {
			g.refuse(w, http.StatusUnsupportedMediaType, codes.InvalidArgument,
				fmt.Sprintf("a %s needs Content-Type: %s (or %s for a stream), not %q", r.Method, contentTypeJSON, contentTypeNDJSON, r.Header.Get("Content-Type")))
			return false
		}
	}
	return true
}

// sameOrigin reports whether origin is r's own origin: the scheme of the
// connection it came on and its Host. Only a Host that passed the Host
// check may be compared; admit checks that first.
func sameOrigin(r *http.Request, origin string) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return r.Host != "" && normOrigin(origin) == scheme+"://"+strings.ToLower(strings.TrimSpace(r.Host))
}

// Guard returns h behind the same checks as the API (Host, Origin,
// Content-Type, OPTIONS), for the other handlers of the listener: the web
// console's assets and the metrics.
func (g *Gateway) Guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.admit(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}

// options answers OPTIONS on a known path: the methods it allows and, for
// a CORS preflight from an allowed origin (admit checked it), what the
// browser may send.
func (g *Gateway) options(w http.ResponseWriter, r *http.Request) {
	ms := g.guard.methods(r.URL.Path)
	if ms == nil {
		g.refuse(w, http.StatusNotFound, codes.NotFound, "no such path: "+r.URL.Path)
		return
	}
	allow := strings.Join(append(slices.Clone(ms), http.MethodOptions), ", ")
	h := w.Header()
	h.Set("Allow", allow)
	if r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", allow)
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
		h.Set("Access-Control-Max-Age", "600")
	}
	w.WriteHeader(http.StatusNoContent)
}

// methodNotAllowed answers a known path asked with a method it does not
// serve: 405 with Allow.
func (g *Gateway) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	if ms := g.guard.methods(r.URL.Path); ms != nil {
		w.Header().Set("Allow", strings.Join(append(slices.Clone(ms), http.MethodOptions), ", "))
	}
	g.refuse(w, http.StatusMethodNotAllowed, codes.Unimplemented,
		fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path))
}

// refuse writes a status without reading the request.
func (g *Gateway) refuse(w http.ResponseWriter, httpCode int, code codes.Code, msg string) {
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(httpCode)
	_, _ = w.Write(g.marshalStatus(status.New(code, msg)))
	_, _ = w.Write([]byte{'\n'})
}

// normOrigin lower-cases an origin and drops a trailing slash, so that
// configured and sent forms compare equal.
func normOrigin(o string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(o)), "/")
}

// hostOnly is the lower-case host of a Host header or host[:port], without
// port or IPv6 brackets.
func hostOnly(hostport string) string {
	h := strings.ToLower(strings.TrimSpace(hostport))
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}
