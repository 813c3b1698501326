package engine

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/store"
)

// GetRecords answers a GetRequest: the records of req.Type with the given
// primary keys, read on one snapshot, and the keys that have none (by
// position and as given). Keys count against the write batch limit (MaxRecordsPerBatch),
// which bounds a request's work. The response is bounded in bytes as it is
// built: by maxBytes when positive (a transport's own limit), always by
// the engine's MaxResponseBytes; keys whose records do not fit are listed
// in unanswered, for the client to ask again. The response holds h of the
// result budget, which the caller releases once it no longer holds the
// response's bytes (see Hold). The records' bytes are read-only: a lone
// key's may be the record cache's own. Each distinct key costs one storage read;
// JSON keys are converted straight into key bytes by protobuf's JSON rules
// for each key field (jsonScalar), key records are read with protowire as
// Remove reads them.
func (e *Engine) GetRecords(ctx context.Context, req *pb.GetRequest, maxBytes int) (*pb.GetResponse, Hold, error) {
	if e.closed.Load() {
		return nil, Hold{}, ErrClosed
	}
	e.stats.Queries.Add(1)
	if obs := e.opts.Observer; obs != nil {
		defer observeGet(obs, time.Now())
	}
	resp, h, err := e.getRecords(ctx, req, e.responseBytes(maxBytes))
	if err != nil {
		e.stats.QueryErrors.Add(1)
	}
	return resp, h, err
}

// responseBytes is the bound of one unary answer (a Get, a Query page):
// the caller's maxBytes when positive and lower, within MaxResponseBytes
// and the whole result budget.
func (e *Engine) responseBytes(maxBytes int) int64 {
	limit := min(int64(e.opts.MaxResponseBytes), e.opts.MaxResultBufferBytes)
	if maxBytes > 0 {
		limit = min(limit, int64(maxBytes))
	}
	return limit
}

func (e *Engine) getRecords(ctx context.Context, req *pb.GetRequest, limit int64) (*pb.GetResponse, Hold, error) {
	g := &getRun{e: e}
	t, keys, err := e.getKeys(req, &g.lone.key)
	if err != nil {
		return nil, Hold{}, err
	}
	g.t, g.url, g.limit, g.versions = t, t.url, limit, req.GetVersions()
	if t.exp != nil {
		g.now = e.now() // a clock read is not free, and most types have no expiry
	}
	if err := g.read(ctx, keys); err != nil {
		e.release(&g.h)
		return nil, Hold{}, err
	}
	resp, anys := g.newResponse(len(keys))
	size := 0
	for i, val := range g.vals {
		switch {
		case g.skipped[i]:
			resp.Unanswered = append(resp.Unanswered, uint32(i)) //nolint:gosec // i < MaxRecordsPerBatch
		case val == nil:
			resp.Missing = append(resp.Missing, uint32(i)) //nolint:gosec // i < MaxRecordsPerBatch
			// The key as the request gave it, so that a caller need not
			// map positions back (keys first, then key_records).
			if nk := len(req.GetKeys()); i < nk {
				resp.MissingKeys = append(resp.MissingKeys, req.GetKeys()[i])
			} else {
				resp.MissingKeyRecords = append(resp.MissingKeyRecords, req.GetKeyRecords()[i-nk])
			}
		default:
			anys[i].TypeUrl, anys[i].Value = t.url, val
			resp.Records = append(resp.Records, &anys[i])
			if g.versions {
				resp.Versions = append(resp.Versions, g.vers[i])
			}
			size += len(val)
		}
	}
	e.stats.PointLookups.Add(uint64(len(keys)))
	e.stats.RecordsRead.Add(uint64(len(resp.Records)))
	return resp, e.take(&g.h, size), nil
}

// loneAnswer is the response to a request of one key, with its record's
// Any.
type loneAnswer struct {
	resp pb.GetResponse
	rec  [1]*anypb.Any
	any  [1]anypb.Any
}

// newResponse returns a response with room for n records, and the Anys
// to hold them (one allocation for them all; none for a lone key, whose
// answer is part of g's).
func (g *getRun) newResponse(n int) (*pb.GetResponse, []anypb.Any) {
	if n == 1 {
		a := &g.lone.answer
		a.resp.Records = a.rec[:0]
		return &a.resp, a.any[:]
	}
	return &pb.GetResponse{Records: make([]*anypb.Any, 0, n)}, make([]anypb.Any, n)
}

// loneKey holds the key of a request of one key: its bytes, when they fit,
// and the slice of keys.
type loneKey struct {
	buf  [48]byte
	keys [1][]byte
}

// getKeys checks a GetRequest and encodes its keys, in request order; a
// lone key goes into lone.
func (e *Engine) getKeys(req *pb.GetRequest, lone *loneKey) (*recType, [][]byte, error) {
	if req.GetType() == "" {
		return nil, nil, &apierror.Error{Code: apierror.InvalidArgument, Msg: "type is missing: name the record type of the keys"}
	}
	t := e.cat.Load().lookup(req.GetType())
	if t == nil || strings.Contains(req.GetType(), "/") {
		return nil, nil, &apierror.Error{Code: apierror.NotFound, Msg: "no record type " + quote(req.GetType()) + " in the schema"}
	}
	n := len(req.GetKeys()) + len(req.GetKeyRecords())
	if max := e.opts.MaxRecordsPerBatch; n > max {
		return nil, nil, apierror.Errorf(apierror.InvalidArgument, "%d keys in one request, more than the limit of %d (max batch records)", n, max)
	}
	// Every key goes into one buffer; ends[i] is where key i ends.
	var buf []byte
	if size := n * (len(t.prefix) + 9); n == 1 && size <= len(lone.buf) {
		buf = lone.buf[:0]
	} else {
		buf = make([]byte, 0, size)
	}
	ends := make([]int, 0, n)
	for i, v := range req.GetKeys() {
		var err error
		if buf, err = t.jsonKey(append(buf, t.prefix...), v); err != nil {
			return nil, nil, &apierror.Error{Code: apierror.InvalidArgument, Msg: fmt.Sprintf("keys[%d]: %v", i, err), Err: err}
		}
		ends = append(ends, len(buf))
	}
	for i, r := range req.GetKeyRecords() {
		if got := e.cat.Load().lookup(r.GetTypeUrl()); got != t {
			return nil, nil, apierror.Errorf(apierror.InvalidArgument, "key_records[%d]: type URL %s is not of type %s", i, quote(r.GetTypeUrl()), req.GetType())
		}
		var field string
		var err error
		if buf, field, err = appendKey(append(buf, t.prefix...), r.GetValue(), t.pk); err != nil {
			return nil, nil, &apierror.Error{Code: apierror.InvalidArgument, Field: field, Msg: fmt.Sprintf("key_records[%d]: %v", i, err), Err: err}
		}
		ends = append(ends, len(buf))
	}
	keys := lone.keys[:]
	if n != 1 {
		keys = make([][]byte, n)
	}
	for i, end := range ends {
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		keys[i] = buf[start:end:end]
	}
	return t, keys, nil
}

// getRun reads a Get's keys within a response's byte bound. vals[i] is
// the value of key i, nil when it has none or was skipped; skipped[i] says
// its record did not fit (or was not read once nothing more could). A key
// named more than once is read once, its value shared, and counted once
// per naming, as the response repeats it.
type getRun struct {
	// lone holds the key, vals, skipped and answer of a request of one
	// key: its run and answer are one allocation.
	lone struct {
		key     loneKey
		val     [1][]byte
		skipped [1]bool
		answer  loneAnswer
	}
	e       *Engine
	t       *recType
	now     instant // a record expired at now reads as missing
	url     string
	limit   int64 // bytes of records (resultBytes) the response may hold
	size    int64 // what it holds so far
	h       hold
	vals    [][]byte
	skipped []bool
	any     bool // a record was answered
	// versions says the request asks for versions: vers[i] is then the
	// version of vals[i].
	versions bool
	vers     []uint64
}

// read reads keys on one view: a lone key with one Get, many through one
// iterator in key order (internal/store/pebble's Iter.Lookup: it keeps its
// sstable iterators open between seeks, where a Get builds them each time).
func (g *getRun) read(ctx context.Context, keys [][]byte) error {
	e := g.e
	if len(keys) == 1 {
		g.vals, g.skipped = g.lone.val[:], g.lone.skipped[:]
	} else {
		g.vals, g.skipped = make([][]byte, len(keys)), make([]bool, len(keys))
	}
	if g.versions {
		g.vers = make([]uint64, len(keys))
	}
	if len(keys) == 1 {
		val, ver, found, err := g.point(keys[0])
		if err != nil {
			return readError("point read", err)
		}
		if found {
			if val == nil {
				val = []byte{} // an empty record is found: nil means missing
			}
			return g.keep(ctx, []int{0}, val, ver)
		}
		return nil
	}
	if len(keys) == 0 {
		return nil
	}
	snap, err := e.st.OpenSnapshot()
	if err != nil {
		return storeError(err)
	}
	defer snap.Close()
	it, err := snap.NewIterator(nil, nil)
	if err != nil {
		return readError("point read", err)
	}
	defer it.Close()
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })
	sorted := make([][]byte, 0, len(order))
	for j, i := range order {
		if j == 0 || !bytes.Equal(keys[i], keys[order[j-1]]) {
			sorted = append(sorted, keys[i])
		}
	}
	// One round trip for a store across a network (etcd); nothing locally.
	if err := it.Prefetch(sorted); err != nil {
		return storeError(err)
	}
	return g.lookups(ctx, it, keys, order)
}

// point reads a lone key as a Search lookup of one key does: through the
// record cache (readThrough). The cache holds no versions: a request for
// them reads the store.
func (g *getRun) point(key []byte) (val []byte, ver uint64, found bool, err error) {
	if g.versions {
		return g.e.st.GetVersioned(key, nil)
	}
	val, found, err = g.e.readThrough(key)
	return val, 0, found, err
}

// lookups reads the keys in key order (order), each distinct key once.
func (g *getRun) lookups(ctx context.Context, it store.Iterator, keys [][]byte, order []int) error {
	var arena []byte
	for j := 0; j < len(order); {
		// same: the positions naming this key.
		k := j + 1
		for k < len(order) && bytes.Equal(keys[order[k]], keys[order[j]]) {
			k++
		}
		same := order[j:k]
		slices.Sort(same) // the first namings are answered first
		j = k
		if g.full() {
			for _, i := range same {
				g.skipped[i] = true
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Lookup appends to dst[:0]: values land one after another in
		// arena, and a value that does not fit starts a new arena (the
		// earlier values keep the old one).
		if cap(arena)-len(arena) < 4<<10 {
			arena = make([]byte, 0, max(64<<10, 2*cap(arena)))
		}
		val, found, err := it.Lookup(keys[same[0]], arena[len(arena):])
		if err != nil {
			return readError("point read", err)
		}
		if !found {
			continue
		}
		if len(val) <= cap(arena)-len(arena) {
			arena = arena[:len(arena)+len(val)]
			val = val[:len(val):len(val)]
		}
		var ver uint64
		if g.versions {
			ver = it.Version()
		}
		if err := g.keep(ctx, same, val, ver); err != nil {
			return err
		}
	}
	if !g.any && slices.Contains(g.skipped, true) {
		return g.tooLarge()
	}
	return nil
}

// full says that no record, however small, fits in the response anymore.
func (g *getRun) full() bool { return g.size+g.cost(0) > g.limit }

// cost is what a record of n bytes adds to the response.
func (g *getRun) cost(n int) int64 {
	c := int64(resultBytes(n, len(g.url)))
	if g.versions {
		c += versionBytes
	}
	return c
}

// keep answers the keys at positions (ascending) with val, at version ver,
// as many of them as fit, holding their bytes of the result budget; it
// marks the others skipped.
func (g *getRun) keep(ctx context.Context, positions []int, val []byte, ver uint64) error {
	if g.t.expired(val, g.now) {
		return nil
	}
	if g.versions {
		if err := g.e.awaitDurable(ctx, ver); err != nil {
			return err
		}
	}
	each := g.cost(len(val))
	fit := min(int64(len(positions)), (g.limit-g.size)/each)
	for _, i := range positions[fit:] {
		g.skipped[i] = true
	}
	if fit == 0 {
		if len(g.vals) == 1 {
			return g.tooLarge()
		}
		return nil
	}
	cost := fit * each
	if err := g.e.cover(ctx, &g.h, g.size+cost, g.size == 0); err != nil {
		return err
	}
	g.size += cost
	g.any = true
	for _, i := range positions[:fit] {
		g.vals[i] = val
		if g.versions {
			g.vers[i] = ver
		}
	}
	return nil
}

// tooLarge is the error of a Get of which no record fits a response.
func (g *getRun) tooLarge() error {
	return apierror.Errorf(apierror.ResourceExhausted,
		"no record left to answer fits in one response of at most %d bytes (docs/limits.md)", g.limit)
}

// jsonKey appends to dst the primary-key encoding of a JSON primary key
// (see GetRequest.keys) of t.
func (t *recType) jsonKey(dst []byte, v *structpb.Value) ([]byte, error) {
	pk := t.rt.PrimaryKey
	vals := make([]*structpb.Value, len(pk)) // by primary-key field
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		for name, fv := range k.StructValue.GetFields() {
			i := slices.IndexFunc(pk, func(kf schema.KeyField) bool { return kf.Path == name })
			if i < 0 {
				return nil, fmt.Errorf("%q is not a primary-key field of %s (its key is %s)", name, t.rt.Name, keyNames(pk))
			}
			vals[i] = fv
		}
		if len(k.StructValue.GetFields()) != len(pk) {
			return nil, fmt.Errorf("the key object needs every primary-key field of %s: %s", t.rt.Name, keyNames(pk))
		}
	case *structpb.Value_ListValue:
		if len(k.ListValue.GetValues()) != len(pk) {
			return nil, fmt.Errorf("a list of %d values, but the primary key of %s has %d fields (%s)", len(k.ListValue.GetValues()), t.rt.Name, len(pk), keyNames(pk))
		}
		copy(vals, k.ListValue.GetValues())
	case nil, *structpb.Value_NullValue:
		return nil, fmt.Errorf("the key is null or missing")
	default:
		if len(pk) != 1 {
			return nil, fmt.Errorf("the primary key of %s has %d fields (%s): give a list or an object", t.rt.Name, len(pk), keyNames(pk))
		}
		vals[0] = v
	}
	for i, kf := range pk {
		switch vals[i].GetKind().(type) {
		case *structpb.Value_NumberValue, *structpb.Value_StringValue, *structpb.Value_BoolValue:
		default:
			return nil, fmt.Errorf("key field %s: want a number, string or bool", kf.Path)
		}
		sc, err := jsonScalar(kf, vals[i])
		if err != nil {
			return nil, fmt.Errorf("key field %s: %w", kf.Path, err)
		}
		dst = appendScalar(dst, kf.Kind, sc)
	}
	return dst, nil
}

func keyNames(pk []schema.KeyField) string {
	names := make([]string, len(pk))
	for i, kf := range pk {
		names[i] = kf.Path
	}
	return strings.Join(names, ", ")
}
