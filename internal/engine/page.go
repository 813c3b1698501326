package engine

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/store"
)

// DefaultPageSize is Query's page size when the request names none.
const DefaultPageSize = 1000

// loadSecret reads (or creates, durably) the key that signs page tokens,
// so a token survives restarts and cannot be forged by a client.
func loadSecret(st store.KV) ([]byte, error) {
	v, found, err := st.Get(keySecret, nil)
	if err != nil {
		return nil, fmt.Errorf("read token secret: %w", err)
	}
	if found && len(v) == 32 {
		return v, nil
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("make token secret: %w", err)
	}
	b := st.NewWriteBatch()
	defer b.Close()
	b.Set(keySecret, secret)
	if err := st.ApplyBatch(b); err != nil {
		return nil, fmt.Errorf("store token secret: %w", err)
	}
	if err := b.Wait(); err != nil {
		return nil, fmt.Errorf("store token secret: %w", err)
	}
	return secret, nil
}

// pageReader opens what a page of c reads from; resuming (a page after
// the first) a point plan iterates, which needs a consistent view: a
// snapshot.
func (e *Engine) pageReader(c *compiled, resuming bool) (store.View, func(), error) {
	rd, done, err := e.reader(c)
	if err != nil || !resuming || rd != e.st {
		return rd, done, err
	}
	done()
	snap, err := e.st.OpenSnapshot()
	if err != nil {
		return nil, nil, storeError(err)
	}
	return snap, func() { snap.Close() }, nil
}

// onePage is what readPage allocates for a page, in one allocation: its
// packer and response, and room for a page of one record (a lookup by
// key): the record's Any, the slice of records and its key.
type onePage struct {
	pk   packer
	resp pb.QueryResponse
	rec  [1]*anypb.Any
	any  [1]anypb.Any
	last [40]byte
}

// readPage reads at most size matches of c after key after from rd into
// a response of at most limit bytes of records (see resultBytes), holding
// them of the result budget in h; last is the key of its last record and
// more says that a match follows it. A page cut short by limit says more.
func (e *Engine) readPage(ctx context.Context, c *compiled, rd store.View, after []byte, size uint64, limit int64, h *hold) (resp *pb.QueryResponse, last []byte, more bool, err error) {
	// A page holds at most size records; a point plan at most one per key.
	expect := int(size)
	if c.plan.Access == query.AccessPKPoint {
		expect = min(expect, len(c.plan.Ranges))
	}
	pg := new(onePage)
	pg.pk = packer{slabSize: min(64, max(expect, 1)), maxBuf: 64 << 10}
	pk, resp := &pg.pk, &pg.resp
	if expect == 1 {
		pk.slab, pk.made = pg.any[:], 1
		resp.Records, last = pg.rec[:0], pg.last[:0]
	}
	cu := &cursor{e: e, c: c, r: rd, pk: pk, want: int(size) + 1}
	var total int64 // record bytes of the page, as resultBytes counts them
	var budgetErr error
	err = cu.run(ctx, c.plan.Ranges, after, func(key, rec []byte) bool {
		if uint64(len(resp.Records)) == size {
			more = true // one match past the page: there is a next page
			return false
		}
		cost := int64(resultBytes(len(rec), len(c.t.url)))
		if cu.wantVer {
			cost += versionBytes
		}
		if total+cost > limit {
			if len(resp.Records) > 0 {
				more = true // the page is full in bytes: the next starts here
			} else {
				budgetErr = apierror.Errorf(apierror.ResourceExhausted,
					"a record of %d bytes is larger than one page may be (%d bytes; docs/limits.md)", len(rec), limit)
			}
			return false
		}
		if budgetErr = e.cover(ctx, h, total+cost, total == 0); budgetErr != nil {
			return false
		}
		total += cost
		last = append(last[:0], key...)
		// Values are sized for what the page can still hold, at most
		// 64 KiB at a time.
		left := int(size) - len(resp.Records)
		if c.plan.Access == query.AccessPKPoint {
			left = min(left, len(c.plan.Ranges))
		}
		resp.Records = append(resp.Records, pk.pack(c.t.url, rec, left*len(rec)))
		if cu.wantVer {
			resp.Versions = append(resp.Versions, cu.ver)
		}
		return true
	})
	cu.flushStats()
	if err == nil {
		err = budgetErr
	}
	return resp, last, more, err
}

// Query returns one page of matches and, when more may follow, a token
// that resumes after the page's last key: fetching N rows costs O(N) however
// deep the page. Each page reads its own snapshot. A page is bounded in
// bytes as GetRecords' answer is (maxBytes, MaxResponseBytes), and ends
// early, with a token, at the bound; it holds h of the result budget,
// which the caller releases (see Hold).
func (e *Engine) Query(ctx context.Context, req *pb.QueryRequest, maxBytes int) (*pb.QueryResponse, Hold, error) {
	var h hold
	resp, err := e.query(ctx, req, e.responseBytes(maxBytes), &h)
	if err != nil {
		e.release(&h)
		return nil, Hold{}, storeError(err) // a compacted revision, on etcd
	}
	size := 0
	for _, r := range resp.Records {
		size += len(r.Value)
	}
	if len(resp.Rows) > 0 {
		size = proto.Size(resp)
	}
	return resp, e.take(&h, size), nil
}

func (e *Engine) query(ctx context.Context, req *pb.QueryRequest, maxBytes int64, h *hold) (*pb.QueryResponse, error) {
	e.stats.Queries.Add(1)
	if req.GetQuery().GetAggregate() != nil {
		return e.aggregatePage(ctx, req, maxBytes, h)
	}
	c, size, err := e.pageQuery(req)
	if err != nil {
		return nil, err
	}
	var after []byte
	var returned uint64
	var scope tokenScope // the query's hash, computed once when a token needs it
	var scoped bool
	scopeOnce := func() tokenScope {
		if !scoped {
			scope, scoped = scopeOf(c), true
		}
		return scope
	}
	if tok := req.GetPageToken(); tok != "" {
		if after, returned, err = e.openToken(tok, scopeOnce(), string(c.t.rt.Name)); err != nil {
			return nil, err
		}
	}
	if c.plan.Count {
		if after != nil {
			return nil, &apierror.Error{Code: apierror.InvalidArgument, Field: "page_token",
				Msg: "invalid page token: a count query is answered in one response"}
		}
		return e.countPage(ctx, c)
	}
	limit := c.plan.Limit
	if limit > 0 {
		if returned >= limit {
			return &pb.QueryResponse{}, nil
		}
		size = min(size, limit-returned)
	}

	start := time.Now()
	rd, done, err := e.pageReader(c, after != nil)
	if err != nil {
		return nil, err
	}
	defer done()
	resp, last, more, err := e.readPage(ctx, c, rd, after, size, maxBytes, h)
	if err != nil {
		return nil, err
	}
	e.queryDone("Query", c, start, uint64(len(resp.Records)), 0)
	if c.q.GetExplain() {
		resp.Plan = c.plan.Explain()
	}
	if more && (limit == 0 || returned+uint64(len(resp.Records)) < limit) {
		resp.NextPageToken = e.sealToken(scopeOnce(), last, returned+uint64(len(resp.Records)))
	}
	return resp, nil
}

// countPage answers a count query: every match (up to the limit) counted
// on one snapshot, in one response. Paging a count would only split one
// number over several round trips.
func (e *Engine) countPage(ctx context.Context, c *compiled) (*pb.QueryResponse, error) {
	rd, done, err := e.reader(c)
	if err != nil {
		return nil, err
	}
	defer done()
	cu := &cursor{e: e, c: c, r: rd}
	err = cu.run(ctx, c.plan.Ranges, nil, func(_, _ []byte) bool { return true })
	cu.flushStats()
	if err != nil {
		return nil, err
	}
	resp := &pb.QueryResponse{Count: cu.n}
	if c.q.GetExplain() {
		resp.Plan = c.plan.Explain()
	}
	return resp, nil
}

// pageQuery compiles a page's query and checks its page size.
func (e *Engine) pageQuery(req *pb.QueryRequest) (*compiled, uint64, error) {
	var c *compiled
	var err error
	if req.GetPageToken() == "" {
		// A plain primary-key lookup skips the planner, as on Search. Only
		// without a token: a point plan never issues one, and resuming
		// needs the planner's full ranges.
		scratch := new(pointScratch)
		scratch.key = scratch.buf[:0]
		c, err = e.compileFast(req.GetQuery(), scratch)
	} else {
		c, err = e.compile(req.GetQuery())
	}
	if err != nil {
		e.stats.QueryErrors.Add(1)
		return nil, 0, err
	}
	size := uint64(req.GetPageSize())
	if size == 0 {
		size = DefaultPageSize
	}
	if size > uint64(e.opts.MaxPageSize) {
		return nil, 0, &apierror.Error{Code: apierror.InvalidArgument, Field: "page_size",
			Msg: fmt.Sprintf("page_size %d is over the limit of %d", size, e.opts.MaxPageSize)}
	}
	return c, size, nil
}

// tokenVersion is the first byte of a token's signed body; a token of
// another layout is refused as malformed rather than misread.
const tokenVersion = 1

// tokenScope is what a token was issued for, checked in this order when it
// comes back: the query (a hash of the request's Query), the type instance
// (its storage id: ids are never reused, so a type dropped and re-created
// has a new one), and the access path (a new index, or an index dropped and
// re-added under a new id, changes the plan and the meaning of the token's
// key).
type tokenScope struct {
	query  uint64
	typeID uint32
	access query.Access
	index  uint32 // 0 unless access is an index range
}

// scopeOf is the scope of a page of c.
func scopeOf(c *compiled) tokenScope {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c.q)
	h := fnv.New64a()
	h.Write(b)
	s := tokenScope{query: h.Sum64(), typeID: c.t.rt.ID, access: c.plan.Access}
	if c.plan.Index != nil {
		s.index = c.plan.Index.ID
	}
	return s
}

// A token is base64url(mac[16] | body), mac = HMAC-SHA256(secret, body)
// truncated, body = version(1) | query hash(8) | type id(4) | access(1) |
// index id(4) | returned uvarint | last key.
func (e *Engine) sealToken(s tokenScope, last []byte, returned uint64) string {
	body := []byte{tokenVersion}
	body = binary.BigEndian.AppendUint64(body, s.query)
	body = binary.BigEndian.AppendUint32(body, s.typeID)
	body = append(body, byte(s.access))
	body = binary.BigEndian.AppendUint32(body, s.index)
	body = binary.AppendUvarint(body, returned)
	body = append(body, last...)
	m := hmac.New(sha256.New, e.secret)
	m.Write(body)
	return base64.RawURLEncoding.EncodeToString(append(m.Sum(nil)[:16], body...))
}

// tokenHead is the length of a token up to its returned count.
const tokenHead = 16 + 1 + 8 + 4 + 1 + 4

// openToken checks a token against the scope of the query it came back
// with. A token that is not well-formed, not ours, or for another query is
// INVALID_ARGUMENT: that request can never succeed. A token that was valid
// but whose type or access path changed under it is FAILED_PRECONDITION:
// the listing cannot continue in this state of the schema, and the client
// must start it again without a token. Resuming would misread the key (page
// two silently restarting, or the listing ending early).
func (e *Engine) openToken(tok string, want tokenScope, typeName string) (last []byte, returned uint64, err error) {
	bad := func(why string) error {
		return &apierror.Error{Code: apierror.InvalidArgument, Field: "page_token", Msg: "invalid page token: " + why}
	}
	stale := func(why string) error {
		return &apierror.Error{Code: apierror.FailedPrecondition, Field: "page_token",
			Msg: "page token is stale: " + why + "; start the listing again without a token"}
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) < tokenHead+1 {
		return nil, 0, bad("malformed")
	}
	m := hmac.New(sha256.New, e.secret)
	m.Write(raw[16:])
	if !hmac.Equal(m.Sum(nil)[:16], raw[:16]) {
		return nil, 0, bad("not issued by this database")
	}
	body := raw[16:]
	if body[0] != tokenVersion {
		return nil, 0, bad("malformed")
	}
	got := tokenScope{
		query:  binary.BigEndian.Uint64(body[1:9]),
		typeID: binary.BigEndian.Uint32(body[9:13]),
		access: query.Access(body[13]),
		index:  binary.BigEndian.Uint32(body[14:18]),
	}
	switch {
	case got.query != want.query:
		return nil, 0, bad("it belongs to another query")
	case got.typeID != want.typeID:
		return nil, 0, stale("type " + typeName + " was dropped and re-created since it was issued")
	case got.access != want.access || got.index != want.index:
		return nil, 0, stale("the query's access path changed since it was issued (an index was built, dropped or re-created)")
	}
	returned, n := binary.Uvarint(raw[tokenHead:])
	if n <= 0 {
		return nil, 0, bad("malformed")
	}
	last = raw[tokenHead+n:]
	if len(last) < keyspace.PrefixLen { // a key is at least its space tag and id
		return nil, 0, bad("malformed")
	}
	return last, returned, nil
}
