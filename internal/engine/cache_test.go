package engine_test

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// cacheModel is the committed history of one key in the race test: its
// writer writes versions 1, 2, 3, … in order; version v removes the record
// when v%4 == 0 and otherwise stores it with name "v". Version 0 is the
// initial absence.
type cacheModel struct {
	started   atomic.Uint64 // highest version whose write has begun
	committed atomic.Uint64 // highest version whose write is visible
}

func modelRemoves(v uint64) bool { return v%4 == 0 }

// check reports whether a read that began when committed was lo and ended
// when started was hi may have returned got (-1: absent): it must be the
// state of some version in [lo, hi].
func (m *cacheModel) check(lo, hi uint64, got int64) bool {
	if got < 0 {
		for v := lo; v <= hi; v++ {
			if v == 0 || modelRemoves(v) {
				return true
			}
		}
		return false
	}
	v := uint64(got)
	return v >= lo && v <= hi && !modelRemoves(v)
}

// recordName returns the name field (2) of a shop.User's bytes.
func recordName(t testing.TB, b []byte) int64 {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad record")
		}
		b = b[n:]
		if num == 2 && typ == protowire.BytesType {
			s, m := protowire.ConsumeString(b)
			v, err := strconv.ParseInt(s, 10, 64)
			if m < 0 || err != nil {
				t.Fatalf("bad name %q", s)
			}
			return v
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			t.Fatalf("bad record")
		}
		b = b[n:]
	}
	t.Fatalf("record without a name")
	return 0
}

func lookup(id int) *pb.Query {
	return &pb.Query{Type: "shop.User", Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
		Field: "id", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_Int{Int: int64(id)}},
	}}}}
}

// searchAll looks every key up in one Search request (the lookups of a
// chunk share an iterator and the cache) and returns each key's name, -1
// when absent. With wire, the responses come as wire bytes
// (engine.WireSink).
func searchAll(ctx context.Context, e *engine.Engine, keys int, wire bool) ([]int64, error) {
	req := &pb.SearchRequest{}
	for id := range keys {
		req.Queries = append(req.Queries, lookup(id))
	}
	sent := false
	recv := func() (*pb.SearchRequest, error) {
		if sent {
			return nil, io.EOF
		}
		sent = true
		return req, nil
	}
	got := make([]int64, keys)
	for i := range got {
		got[i] = -1
	}
	var mu sync.Mutex
	var bad error
	send := func(resp *pb.SearchResponse) error {
		mu.Lock()
		defer mu.Unlock()
		for _, qe := range resp.Errors {
			bad = fmt.Errorf("query %d: %s", qe.Query, qe.Message)
		}
		for _, rb := range resp.Results {
			for _, a := range rb.Records {
				v, err := strconv.ParseInt(nameOf(a.Value), 10, 64)
				if err != nil {
					bad = err
				}
				got[rb.Query] = v
			}
		}
		return nil
	}
	var sink engine.SearchSink = sendFunc(send)
	if wire {
		sink = wireSink{sendFunc(send), func(b []byte) error {
			var resp pb.SearchResponse
			if err := proto.Unmarshal(b, &resp); err != nil {
				return err
			}
			return send(&resp)
		}}
	}
	if err := e.SearchStream(ctx, recvFunc(recv), sink); err != nil {
		return nil, err
	}
	return got, bad
}

func nameOf(b []byte) string {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num == 2 && typ == protowire.BytesType {
			s, _ := protowire.ConsumeString(b)
			return s
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return ""
		}
		b = b[n:]
	}
	return ""
}

// Writers and readers race on a few keys; every read, through Search (a
// chunk's shared iterator and the record cache), Get, GetRecords and
// Query, must
// return the state of a version committed no earlier than the last one
// visible when the read began: the cache never serves a stale or
// uncommitted record. The small cache also makes fills evict.
func TestRecordCacheRace(t *testing.T) {
	for _, cacheBytes := range []int64{0, 64 * 200, -1} {
		t.Run(fmt.Sprintf("cache=%d", cacheBytes), func(t *testing.T) {
			te := openEngine(t, t.TempDir(), engine.Options{RecordCacheBytes: cacheBytes})
			te.Apply(map[string]string{"shop.proto": shopProto})
			raceCache(t, te)
		})
	}
}

func raceCache(t *testing.T, te *testEngine) {
	const keys, writers, versions = 16, 4, 150
	models := make([]cacheModel, keys)
	ctx := t.Context()
	var wg sync.WaitGroup
	var writing atomic.Int32
	writing.Store(writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer writing.Add(-1)
			wr := te.E.NewWriter()
			defer wr.Close()
			for v := uint64(1); v <= versions; v++ {
				for id := w; id < keys; id += writers {
					m := &models[id]
					op, js := engine.OpUpsert, fmt.Sprintf(`{"id":%d,"name":"%d","email":"%d@x"}`, id, v, id)
					if modelRemoves(v) {
						op, js = engine.OpRemove, fmt.Sprintf(`{"id":%d}`, id)
					}
					m.started.Store(v)
					if err := wr.Apply(ctx, engine.Batch{Op: op, Records: []*anypb.Any{te.Rec("shop.User", js)}}); err != nil {
						t.Errorf("write %d v%d: %v", id, v, err)
						return
					}
					m.committed.Store(v)
				}
			}
			if _, err := wr.Sync(); err != nil {
				t.Error(err)
			}
		}()
	}
	readers := []func() ([]int64, error){
		func() ([]int64, error) { return searchAll(ctx, te.E, keys, false) },
		func() ([]int64, error) { return searchAll(ctx, te.E, keys, true) },
		func() ([]int64, error) {
			got := make([]int64, keys)
			for id := range keys {
				a, err := te.E.Get(ctx, te.Rec("shop.User", fmt.Sprintf(`{"id":%d}`, id)))
				if err != nil {
					return nil, err
				}
				got[id] = -1
				if a != nil {
					got[id] = recordName(t, a.Value)
				}
			}
			return got, nil
		},
		func() ([]int64, error) {
			// GetRecords of one key at a time: the unary Get's lone key,
			// which the cache serves.
			got := make([]int64, keys)
			for id := range keys {
				resp, h, err := te.E.GetRecords(ctx, &pb.GetRequest{Type: "shop.User", Keys: []*structpb.Value{structpb.NewNumberValue(float64(id))}}, 0)
				if err != nil {
					return nil, err
				}
				h.Release()
				got[id] = -1
				for _, a := range resp.Records {
					got[id] = recordName(t, a.Value)
				}
			}
			return got, nil
		},
		func() ([]int64, error) {
			got := make([]int64, keys)
			for id := range keys {
				resp, err := query(te.E, ctx, &pb.QueryRequest{Query: lookup(id)})
				if err != nil {
					return nil, err
				}
				got[id] = -1
				for _, a := range resp.Records {
					got[id] = recordName(t, a.Value)
				}
			}
			return got, nil
		},
	}
	var reads atomic.Int64
	for _, read := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lo := make([]uint64, keys)
			for writing.Load() > 0 && !t.Failed() {
				for id := range keys {
					lo[id] = models[id].committed.Load()
				}
				got, err := read()
				if err != nil {
					t.Error(err)
					return
				}
				for id := range keys {
					if hi := models[id].started.Load(); !models[id].check(lo[id], hi, got[id]) {
						t.Errorf("key %d: read %d, committed versions in [%d, %d]", id, got[id], lo[id], hi)
					}
				}
				reads.Add(1)
			}
		}()
	}
	wg.Wait()
	// After the race every read sees the last version.
	final, err := searchAll(ctx, te.E, keys, true)
	if err != nil {
		t.Fatal(err)
	}
	for id, v := range final {
		if !models[id].check(versions, versions, v) {
			t.Errorf("key %d: final read %d, want version %d", id, v, versions)
		}
	}
	if reads.Load() == 0 {
		t.Fatal("no read overlapped the writes")
	}
}

// Dropping a type empties the cache: a type added again under the same
// name finds none of the dropped type's records.
func TestRecordCacheDropType(t *testing.T) {
	te := newEngine(t)
	te.MustWrite(engine.OpInsert, []*anypb.Any{te.Rec("shop.User", `{"id":1,"name":"7","email":"a@x"}`)})
	key := te.Rec("shop.User", `{"id":1}`)
	for range 2 { // the second read is served from the cache
		if a, err := te.E.Get(t.Context(), key); err != nil || a == nil {
			t.Fatalf("get: %v %v", a, err)
		}
	}
	const other = `syntax = "proto3";
package other;
import "protobase/v1/options.proto";
message Thing {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
}
`
	if _, err := te.E.ApplySchema(t.Context(), &pb.ApplySchemaRequest{
		Files: map[string]string{"other.proto": other}, AllowDrop: []string{"shop.User", "shop.Member"},
	}); err != nil {
		t.Fatal(err)
	}
	te.Apply(map[string]string{"other.proto": other, "shop.proto": shopProto})
	if a, err := te.E.Get(t.Context(), key); err != nil || a != nil {
		t.Fatalf("after drop and re-add: %v %v", a, err)
	}
}
