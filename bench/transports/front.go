package transports

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
)

// The front of the transports experiment (seed 002's api02): an HTTP
// service answering GET /records/{id} with the record as JSON, which it
// gets from a fetcher: in-process (direct) or one hop away over gRPC,
// HTTP/2 JSON or NATS. Every fetcher decodes what its hop returns into a
// labItem and the front encodes that one way, so every mode sends the same
// bytes for the same id and only the hop differs.

// labItem is a protobase_lab.Item as the front serves it. The JSON tags
// read the REST gateway's proto3 JSON, where int64s are strings.
type labItem struct {
	ID      int64  `json:"id,string"`
	Name    string `json:"name"`
	Email   string `json:"email"`
	Created int64  `json:"created,string"`
	Note    string `json:"note"`
}

// decodeItem decodes the protobuf encoding of a protobase_lab.Item into
// it, skipping unknown fields as proto3 does.
func decodeItem(b []byte, it *labItem) error {
	*it = labItem{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("decode item: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 4) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("decode item field %d: %w", num, protowire.ParseError(n))
			}
			if num == 1 {
				it.ID = int64(v)
			} else {
				it.Created = int64(v)
			}
			b = b[n:]
		case (num == 2 || num == 3 || num == 5) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("decode item field %d: %w", num, protowire.ParseError(n))
			}
			switch num {
			case 2:
				it.Name = string(v)
			case 3:
				it.Email = string(v)
			default:
				it.Note = string(v)
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("decode item field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return nil
}

// appendItemJSON appends the front's JSON for it: one fixed field order
// and int64s as numbers, whatever the hop returned.
func appendItemJSON(dst []byte, it *labItem) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, it.ID, 10)
	dst = append(dst, `,"name":`...)
	dst = appendJSONString(dst, it.Name)
	dst = append(dst, `,"email":`...)
	dst = appendJSONString(dst, it.Email)
	dst = append(dst, `,"created":`...)
	dst = strconv.AppendInt(dst, it.Created, 10)
	dst = append(dst, `,"note":`...)
	dst = appendJSONString(dst, it.Note)
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD (as
// encoding/json does).
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
			i++
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			i++
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, "\ufffd"...)
			} else {
				dst = append(dst, s[i:i+n]...)
			}
			i += n
		}
	}
	return append(dst, '"')
}

// errNotFound is a fetch of an id that is not stored.
var errNotFound = errors.New("no such record")

// fetcher gets one item for the front. Implementations are safe for
// concurrent use: the front calls fetch from every connection's handler.
type fetcher interface {
	fetch(ctx context.Context, id int64, it *labItem) error
	close() error
}

// front is a running front service. Invariant: fetches counts the fetch
// calls that returned an item, so that the experiment can hold the
// server's point-lookup counter against it.
type front struct {
	lis     net.Listener
	srv     *http.Server
	f       fetcher
	fetches atomic.Uint64
	bufs    sync.Pool // *[]byte response buffers
}

// jsonContentType is shared by every response so that setting the header
// does not allocate.
var jsonContentType = []string{"application/json"}

// startFront serves f on a free loopback port (HTTP/1.1, keep-alive) and
// takes ownership of f: close closes it.
func startFront(f fetcher) (*front, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = f.close()
		return nil, fmt.Errorf("front: listen: %w", err)
	}
	fr := &front{lis: lis, f: f}
	fr.bufs.New = func() any { b := make([]byte, 0, 512); return &b }
	mux := http.NewServeMux()
	mux.HandleFunc("GET /records/{id}", fr.serveRecord)
	fr.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = fr.srv.Serve(lis) }()
	return fr, nil
}

// addr returns the front's host:port.
func (fr *front) addr() string { return fr.lis.Addr().String() }

func (fr *front) serveRecord(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "bad record id", http.StatusBadRequest)
		return
	}
	var it labItem
	switch err := fr.f.fetch(r.Context(), id, &it); {
	case errors.Is(err, errNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	fr.fetches.Add(1)
	bp := fr.bufs.Get().(*[]byte)
	b := appendItemJSON((*bp)[:0], &it)
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	_, _ = w.Write(b)
	*bp = b
	fr.bufs.Put(bp)
}

// close stops the front, waiting for running requests, then its fetcher.
func (fr *front) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := fr.srv.Shutdown(ctx)
	if err != nil {
		err = fmt.Errorf("front: shutdown: %w", err)
	}
	return errors.Join(err, fr.f.close())
}

// queryFetcher looks an item up with a unary primary-key Query: on the
// engine in-process (direct) or over gRPC, the same request either way so
// that the two differ by the hop alone.
type queryFetcher struct {
	query func(context.Context, *pb.QueryRequest) (*pb.QueryResponse, error)
}

func (q queryFetcher) fetch(ctx context.Context, id int64, it *labItem) error {
	resp, err := q.query(ctx, &pb.QueryRequest{Query: bench.LookupQuery(id)})
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	switch len(resp.Records) {
	case 0:
		return errNotFound
	case 1:
		return decodeItem(resp.Records[0].GetValue(), it)
	}
	return fmt.Errorf("query by primary key returned %d records", len(resp.Records))
}

func (queryFetcher) close() error { return nil }

// getFetcher looks an item up with server.Server.Get in-process: the no-hop
// counterpart of the nats mode, which reaches the same call.
type getFetcher struct {
	get func(context.Context, *anypb.Any) (*anypb.Any, error)
}

func (g getFetcher) fetch(ctx context.Context, id int64, it *labItem) error {
	var buf [16]byte
	rec, err := g.get(ctx, &anypb.Any{TypeUrl: bench.TypeURLPrefix + bench.ItemType, Value: appendItemKeyValue(buf[:0], id)})
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if rec == nil {
		return errNotFound
	}
	return decodeItem(rec.GetValue(), it)
}

func (getFetcher) close() error { return nil }

// restFetcher posts the same Query as JSON to the REST gateway over
// cleartext HTTP/2: every handler's request is a stream on one shared
// connection (seed 002's "HTTP/2 multiplexing").
type restFetcher struct {
	client *http.Client
	url    string // http(s)://HOST:PORT/v1/query
	// authorization is the Authorization header's value, or nil.
	authorization []string
	// h2 counts responses that came over HTTP/2, so that tests can tell
	// the hop was what it claims.
	h2 atomic.Uint64
}

// newRESTFetcher talks to the REST gateway at addr: over TLS when tlsCfg
// is set (HTTP/2 by ALPN), else cleartext HTTP/2; with key, every request
// carries it.
func newRESTFetcher(addr, key string, tlsCfg *tls.Config) *restFetcher {
	var protos http.Protocols
	tr := &http.Transport{Protocols: &protos}
	scheme := "http"
	if tlsCfg != nil {
		protos.SetHTTP2(true) // never HTTP/1.1
		tr.TLSClientConfig, scheme = tlsCfg.Clone(), "https"
	} else {
		protos.SetUnencryptedHTTP2(true) // h2c with prior knowledge, never HTTP/1.1
	}
	f := &restFetcher{client: &http.Client{Transport: tr}, url: scheme + "://" + addr + "/v1/query"}
	if key != "" {
		f.authorization = []string{"Bearer " + key}
	}
	return f
}

func (f *restFetcher) fetch(ctx context.Context, id int64, it *labItem) error {
	body := appendRESTQuery(make([]byte, 0, 128), id)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("rest: %w", err)
	}
	req.Header["Content-Type"] = jsonContentType
	if f.authorization != nil {
		req.Header["Authorization"] = f.authorization
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return fmt.Errorf("rest: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.ProtoMajor != 2 {
		return fmt.Errorf("rest: answered over %s, not HTTP/2", resp.Proto)
	}
	f.h2.Add(1)
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("rest: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	var out struct {
		Records []labItem `json:"records"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("rest: decode response: %w", err)
	}
	switch len(out.Records) {
	case 0:
		return errNotFound
	case 1:
		*it = out.Records[0]
		return nil
	}
	return fmt.Errorf("rest: query by primary key returned %d records", len(out.Records))
}

func (f *restFetcher) close() error {
	f.client.CloseIdleConnections()
	return nil
}

// appendRESTQuery appends bench.LookupQuery(id) as a QueryRequest in proto3 JSON.
func appendRESTQuery(dst []byte, id int64) []byte {
	dst = append(dst, `{"query":{"type":"`+bench.ItemType+`","where":{"cmp":{"field":"id","op":"OP_EQ","value":{"int":"`...)
	dst = strconv.AppendInt(dst, id, 10)
	return append(dst, `"}}}}}`...)
}

// natsFetcher asks PREFIX.get over NATS request-reply with a protobuf key
// record, on its own connection to the NATS server.
type natsFetcher struct {
	nc      *nats.Conn
	subject string
	// authorization is the Authorization header's value, or "".
	authorization string
}

// newNATSFetcher connects to the NATS server at url: over TLS when tlsCfg
// is set; with key, logged in with it (a Protobase embedded server's NATS
// login), and every request carries it.
func newNATSFetcher(url, prefix, key string, tlsCfg *tls.Config) (*natsFetcher, error) {
	opts := []nats.Option{nats.Name("protobase-bench-front")}
	if tlsCfg != nil {
		opts = append(opts, nats.Secure(tlsCfg.Clone()))
	}
	f := &natsFetcher{subject: prefix + ".get"}
	if key != "" {
		opts = append(opts, natstransport.ClientOptions(key)...)
		f.authorization = "Bearer " + key
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect to %s: %w", natstransport.RedactURL(url), err)
	}
	f.nc = nc
	return f, nil
}

func (f *natsFetcher) fetch(ctx context.Context, id int64, it *labItem) error {
	var buf [64]byte
	req := &nats.Msg{Subject: f.subject, Data: appendItemKey(buf[:0], id)}
	if f.authorization != "" {
		req.Header = nats.Header{natstransport.HeaderAuthorization: []string{f.authorization}}
	}
	msg, err := f.nc.RequestMsgWithContext(ctx, req)
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		if code == "404" {
			return errNotFound
		}
		return fmt.Errorf("nats: error %s: %s", code, msg.Header.Get(micro.ErrorHeader))
	}
	val, err := anyValue(msg.Data)
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	return decodeItem(val, it)
}

func (f *natsFetcher) close() error {
	f.nc.Close()
	return nil
}

// appendItemKey appends a google.protobuf.Any holding a protobase_lab.Item
// with only its primary key (id) set: what PREFIX.get takes.
func appendItemKey(dst []byte, id int64) []byte {
	var key [16]byte
	k := appendItemKeyValue(key[:0], id)
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, bench.TypeURLPrefix+bench.ItemType)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	return protowire.AppendBytes(dst, k)
}

// appendItemKeyValue appends a protobase_lab.Item with only its primary
// key (id) set.
func appendItemKeyValue(dst []byte, id int64) []byte {
	dst = protowire.AppendTag(dst, 1, protowire.VarintType)
	return protowire.AppendVarint(dst, uint64(id))
}

// anyValue returns the value field of an encoded google.protobuf.Any.
func anyValue(b []byte) ([]byte, error) {
	var val []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("decode Any: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if num == 2 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, fmt.Errorf("decode Any value: %w", protowire.ParseError(n))
			}
			val, b = v, b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, fmt.Errorf("decode Any field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return val, nil
}

// searchFetcher multiplexes the front's lookups on one long-lived Search
// stream: each request sends one query and waits for its results, but no
// request pays for a new HTTP/2 stream, its headers and the per-call work of
// a unary RPC. This is how a service would make the hop to Protobase.
type searchFetcher struct {
	s *client.Search
}

func newSearchFetcher(c *client.Client) (fetcher, string, error) {
	s, err := c.NewSearch(context.Background())
	if err != nil {
		return nil, "", fmt.Errorf("open search stream: %w", err)
	}
	return &searchFetcher{s: s}, "", nil
}

func (f *searchFetcher) fetch(_ context.Context, id int64, it *labItem) error {
	res, err := f.s.Query(bench.LookupQuery(id))
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	recs, err := res.All()
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	switch len(recs) {
	case 0:
		return errNotFound
	case 1:
		return decodeItem(recs[0].GetValue(), it)
	}
	return fmt.Errorf("search by primary key returned %d records", len(recs))
}

func (f *searchFetcher) close() error { return f.s.Close() }
