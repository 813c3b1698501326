package watch_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/engine/enginetest"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/testschema"
	"github.com/protobase/protobase/internal/watch"
)

const shopProto = testschema.ShopMembers

// blobProto is a type without indexes whose records are as large as a
// test makes them.
const blobProto = `syntax = "proto3";
package blob;
import "protobase/v1/options.proto";

message Blob {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  bytes data = 2;
}
`

// testEngine is an engine on a real Pebble store in a temporary
// directory, and the Watch service on it.
type testEngine struct {
	*enginetest.Engine
	w *watch.Service
}

func openEngine(t testing.TB, dir string, opts engine.Options) *testEngine {
	t.Helper()
	te := enginetest.Open(t, dir, opts)
	return &testEngine{Engine: te, w: watch.New(te.E, watch.Options{})}
}

// reopen closes the engine and store and opens them again on the same
// directory.
func (te *testEngine) reopen() *testEngine {
	te.Close()
	return openEngine(te.T, te.Dir, te.Opts)
}

// newEngine opens an engine on a fresh directory with shopProto applied.
func newEngine(t testing.TB) *testEngine {
	t.Helper()
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"shop.proto": shopProto})
	return te
}

// watchEngine opens an engine with the change log on and shopProto.
func watchEngine(t *testing.T, opts engine.Options) *testEngine {
	t.Helper()
	if opts.WatchRetention == 0 {
		opts.WatchRetention = time.Hour
	}
	opts.WatchTrimInterval = time.Hour // tests trim with ChangeLog().Trim
	te := openEngine(t, t.TempDir(), opts)
	te.Apply(map[string]string{"shop.proto": shopProto})
	return te
}

// blobEngine is watchEngine with blobProto beside shopProto.
func blobEngine(t *testing.T, opts engine.Options) *testEngine {
	t.Helper()
	te := watchEngine(t, opts)
	te.Apply(map[string]string{"shop.proto": shopProto, "blob.proto": blobProto})
	return te
}

// releasing adapts a test's send function, which keeps nothing of a
// response once it returns, to the service's: each response's hold of
// the result budget is given back when send returns.
func releasing[M any](send func(M) error) func(M, engine.Hold) error {
	return func(m M, h engine.Hold) error {
		defer h.Release()
		return send(m)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func codeOf(err error) apierror.Code { return apierror.CodeOf(err) }

func oldest() *pb.WatchStart {
	return &pb.WatchStart{Start: &pb.WatchStart_Oldest{Oldest: true}}
}

func startAfter(c uint64) *pb.WatchStart {
	return &pb.WatchStart{Start: &pb.WatchStart_After{After: &pb.Position{Commit: c}}}
}

func users(te *testEngine, from, n int) []*anypb.Any {
	out := make([]*anypb.Any, n)
	for i := range out {
		id := itoa(from + i)
		out[i] = te.Rec("shop.User", `{"id": `+id+`, "name": "n`+id+`", "email": "e`+id+`"}`)
	}
	return out
}

// blob is a blob.Blob record of id holding n random bytes.
func blob(id int64, n int, seed uint64) *anypb.Any {
	data := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, uint64(id)))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(id))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, data)
	return &anypb.Any{TypeUrl: "type.googleapis.com/blob.Blob", Value: b}
}

func blobs(from, n, size int, seed uint64) []*anypb.Any {
	out := make([]*anypb.Any, n)
	for i := range out {
		out[i] = blob(int64(from+i), size, seed)
	}
	return out
}

// watchResult is what one Watch call received and how it ended.
type watchResult struct {
	changes  []*pb.Change
	progress []*pb.Position
	err      error
}

// watchUntil runs Watch until it has received n changes (n <= 0: the
// first message), then cancels it, or until it fails.
func (te *testEngine) watchUntil(req *pb.WatchRequest, n int) watchResult {
	te.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r watchResult
	err := te.w.Watch(ctx, req, releasing(func(bp *[]byte) error {
		b := *bp
		m := new(pb.WatchResponse)
		if err := proto.Unmarshal(b, m); err != nil {
			te.T.Errorf("a watch response does not decode: %v", err)
			return err
		}
		r.changes = append(r.changes, m.Changes...)
		r.progress = append(r.progress, m.Progress)
		if (n <= 0 && len(r.progress) == 1) || (n > 0 && len(r.changes) >= n) {
			cancel()
		}
		return nil
	}))
	if !errors.Is(err, context.Canceled) {
		r.err = err
	}
	return r
}

// watchRaw runs Watch until a message's progress reaches the whole commit
// last, and returns every message's bytes.
func (te *testEngine) watchRaw(req *pb.WatchRequest, last uint64) [][]byte {
	te.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out [][]byte
	err := te.w.Watch(ctx, req, releasing(func(bp *[]byte) error {
		b := *bp
		out = append(out, append([]byte(nil), b...))
		m := new(pb.WatchResponse)
		if err := proto.Unmarshal(b, m); err != nil {
			return err
		}
		if p := m.GetProgress(); p.GetCommit() >= last && p.Index == nil {
			cancel()
		}
		return nil
	}))
	if !errors.Is(err, context.Canceled) {
		te.T.Fatalf("watch: %v", err)
	}
	return out
}

// logValues returns the largest key and value the change log stores, and
// how many keys it has.
func (te *testEngine) logValues() (largest, keys int) {
	te.T.Helper()
	it, err := te.St.NewIterator([]byte(keyspace.LogPrefix), keyspace.PrefixEnd([]byte(keyspace.LogPrefix)))
	if err != nil {
		te.T.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		largest = max(largest, len(it.Value()))
		keys++
	}
	if err := it.Error(); err != nil {
		te.T.Fatal(err)
	}
	return largest, keys
}

// wantChanges checks that changes are the records of recs in order, from
// commit c, change index first on.
func wantChanges(t *testing.T, changes []*pb.Change, c uint64, first int, recs, olds []*anypb.Any) {
	t.Helper()
	if len(changes) < len(recs) {
		t.Fatalf("%d changes, want %d", len(changes), len(recs))
	}
	for i, rec := range recs {
		ch := changes[i]
		if ch.GetPosition().GetCommit() != c || ch.GetPosition().GetIndex() != uint32(first+i) {
			t.Fatalf("change %d at %v, want {commit %d, index %d}", i, ch.GetPosition(), c, first+i)
		}
		if !bytes.Equal(ch.GetRecord().GetValue(), rec.Value) {
			t.Fatalf("change %d of commit %d: record of %d bytes differs from the one written (%d bytes)",
				i, c, len(ch.GetRecord().GetValue()), len(rec.Value))
		}
		if olds != nil && !bytes.Equal(ch.GetOldRecord().GetValue(), olds[i].Value) {
			t.Fatalf("change %d of commit %d: old record differs from the one replaced", i, c)
		}
	}
}
