package engine_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/store"
	"github.com/protobase/protobase/internal/store/etcd"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/internal/testschema"
)

// holdStore is the etcd store, with a gate in front of ApplyBatch: once
// armed, the first transaction to reach it waits there, after its phase 2,
// until the test lets it go. It observes the engine's calls and passes
// them on unchanged to the real store.
type holdStore struct {
	*etcd.Store
	mu      sync.Mutex
	armed   bool
	held    chan struct{} // closed once a transaction waits at the gate
	release chan struct{} // closed by the test to let it go
}

func (h *holdStore) ApplyBatch(b store.WriteBatch) error {
	h.mu.Lock()
	hold := h.armed
	h.armed = false
	h.mu.Unlock()
	if hold {
		close(h.held)
		<-h.release
	}
	return h.Store.ApplyBatch(b)
}

// arm makes the next transaction wait at the gate.
func (h *holdStore) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.held, h.release = true, make(chan struct{}), make(chan struct{})
}

// openShared opens an engine on a fresh prefix of the etcd member at ep,
// with shopProto applied.
func openShared(t *testing.T, ep string) (*engine.Engine, *holdStore) {
	t.Helper()
	e, hs := openSharedOn(t, ep, "/pipe/", engine.Options{})
	applyTo(t, e, &pb.ApplySchemaRequest{Files: map[string]string{"shop.proto": shopProto}})
	return e, hs
}

// openSharedOn opens an engine with opts on prefix of the etcd member at
// ep, through a holdStore, and closes both at the end of the test.
func openSharedOn(t *testing.T, ep, prefix string, opts engine.Options) (*engine.Engine, *holdStore) {
	t.Helper()
	st, err := etcd.Open(etcd.Options{Endpoints: []string{ep}, Prefix: prefix, RequestTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hs := &holdStore{Store: st}
	e, err := engine.Open(t.Context(), hs, opts)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close engine: %v", err)
		}
		st.Close()
	})
	return e, hs
}

// applyTo applies req to e, failing the test if it is refused.
func applyTo(t *testing.T, e *engine.Engine, req *pb.ApplySchemaRequest) {
	t.Helper()
	if _, err := e.ApplySchema(t.Context(), req); err != nil {
		t.Fatalf("apply schema: %v", err)
	}
}

func sharedUser(t *testing.T, e *engine.Engine, id int) *anypb.Any {
	t.Helper()
	rt := e.Schema().Types[protoreflect.FullName("shop.User")]
	a, err := testschema.Record(rt.Desc, fmt.Sprintf(`{"id": %d, "email": "u%d@example.com", "name": "n%d"}`, id, id, id))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// On a shared store the batches of different streams are in flight
// together: while one stream's transaction has not come back, another
// stream of the same engine checks and commits its batch. The first
// transaction is held at the store until the second has committed; a
// write lock spanning the transaction would keep the second from starting.
func TestSharedBatchesInFlightTogether(t *testing.T) {
	e, hs := openShared(t, etcdtest.Start(t, etcdtest.Roomy))
	apply := func(id int) error {
		w := e.NewWriter()
		defer w.Close()
		if err := w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{sharedUser(t, e, id)}}); err != nil {
			return err
		}
		_, err := w.Sync()
		return err
	}
	hs.arm()
	first := make(chan error, 1)
	go func() { first <- apply(1) }()
	<-hs.held
	second := make(chan error, 1)
	go func() { second <- apply(2) }()
	done := false
	select {
	case err := <-second:
		done = true
		if err != nil {
			t.Errorf("second stream: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the second stream's batch did not commit while the first stream's transaction was in flight")
	}
	close(hs.release)
	if err := <-first; err != nil {
		t.Errorf("first stream: %v", err)
	}
	if !done {
		if err := <-second; err != nil {
			t.Errorf("second stream: %v", err)
		}
	}
	r, err := engine.Check(t.Context(), hs)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("store inconsistent: %v", r.Problems)
	}
}

// A batch held at the store after its phase 2 loses its preconditions to a
// batch of another stream that inserted the same unique value meanwhile:
// it is checked again on fresh reads and refused with the unique
// violation, never committed beside it.
func TestSharedHeldBatchRechecked(t *testing.T) {
	e, hs := openShared(t, etcdtest.Start(t, etcdtest.Roomy))
	rt := e.Schema().Types[protoreflect.FullName("shop.User")]
	rec := func(id int) *anypb.Any {
		a, err := testschema.Record(rt.Desc, fmt.Sprintf(`{"id": %d, "email": "same@example.com"}`, id))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	apply := func(id int) error {
		w := e.NewWriter()
		defer w.Close()
		return w.Apply(t.Context(), engine.Batch{Op: engine.OpInsert, Records: []*anypb.Any{rec(id)}})
	}
	hs.arm()
	first := make(chan error, 1)
	go func() { first <- apply(1) }()
	<-hs.held
	second := make(chan error, 1)
	go func() { second <- apply(2) }()
	var errSecond error
	select {
	case errSecond = <-second:
	case <-time.After(30 * time.Second):
		t.Error("the second stream's batch did not commit while the first stream's transaction was in flight")
	}
	close(hs.release)
	errFirst := <-first
	if errSecond != nil {
		t.Fatalf("second stream: %v", errSecond)
	}
	// The second committed first: the first, checked again, is refused.
	var ae *apierror.Error
	if !errors.As(errFirst, &ae) || ae.Code != apierror.AlreadyExists || ae.Write == nil || ae.Write.Field != "email" {
		t.Fatalf("first stream: %v, want ALREADY_EXISTS on email", errFirst)
	}
}
