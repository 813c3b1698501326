package server_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// patchProto is the patch tests' schema: pt.Account has ten fields beside
// its key, a unique index and a non-unique one; pt.Note loses a field in
// patchProtoLater.
const patchProto = `syntax = "proto3";
package pt;
import "protobase/v1/options.proto";

message Account {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "email" unique: true }
    index: { fields: "city" }
  };
  int64 id = 1;
  string name = 2;
  string email = 3;
  string city = 4;
  int64 balance = 5;
  uint32 visits = 6;
  double score = 7;
  bool active = 8;
  repeated string tags = 9;
  Address address = 10;
  int32 small = 11;
}

message Address {
  string street = 1;
  string zip = 2;
}

message Note {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  string text = 2;
  string draft = 3;
}
`

// patchProtoLater removes pt.Note's draft: stored notes keep its bytes as
// an unknown field.
var patchProtoLater = patchProto[:len(patchProto)-len("  string draft = 3;\n}\n")] + "  reserved 3;\n}\n"

func accountJSON(id int, name, email, city string) string {
	return fmt.Sprintf(`{"id": %d, "name": %q, "email": %q, "city": %q, "balance": 100, "visits": 3,
		"score": 1.5, "active": true, "tags": ["a", "b"], "address": {"street": "Main 1", "zip": "0150"}, "small": 5}`,
		id, name, email, city)
}

// apply sends one batch with client.Apply.
func (ts *testServer) apply(b client.Batch) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return ts.C.Apply(ctx, b)
}

// patch sends one batch patching recs.
func (ts *testServer) patch(fields, add []string, recs ...*anypb.Any) error {
	ms := make([]proto.Message, len(recs))
	for i, r := range recs {
		ms[i] = r
	}
	_, err := ts.apply(client.Batch{Op: client.Patch, Records: ms, Fields: fields, Add: add})
	return err
}

// account returns the stored bytes of account id (nil when absent).
func (ts *testServer) account(id int) []byte {
	ts.T.Helper()
	recs, err := ts.C.Get(context.Background(), "pt.Account", id)
	if err != nil {
		ts.T.Fatal(err)
	}
	if recs[0] == nil {
		return nil
	}
	return recs[0].Value
}

// wantAccount checks that account id decodes to the record js.
func (ts *testServer) wantAccount(id int, js string) {
	ts.T.Helper()
	md := ts.Desc("pt.Account")
	got, want := dynamicpb.NewMessage(md), dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(ts.account(id), got); err != nil {
		ts.T.Fatal(err)
	}
	if err := proto.Unmarshal(ts.Rec("pt.Account", js).Value, want); err != nil {
		ts.T.Fatal(err)
	}
	if !proto.Equal(got, want) {
		ts.T.Fatalf("account %d = %v, want %v", id, got, want)
	}
}

// cityIDs returns the ids of the accounts a query on city finds.
func (ts *testServer) cityIDs(city string) []int64 {
	ts.T.Helper()
	page, err := ts.C.Query(context.Background(), &pb.Query{Type: "pt.Account", Filter: fmt.Sprintf("city = %q", city)}, 100, "")
	if err != nil {
		ts.T.Fatal(err)
	}
	var ids []int64
	for _, r := range page.Records {
		m := dynamicpb.NewMessage(ts.Desc("pt.Account"))
		if err := proto.Unmarshal(r.Value, m); err != nil {
			ts.T.Fatal(err)
		}
		ids = append(ids, servertest.FieldValue(m, "id").Int())
	}
	return ids
}

// withoutField returns b without the occurrences of top-level field num.
func withoutField(t *testing.T, b []byte, num protowire.Number) []byte {
	t.Helper()
	var out []byte
	for len(b) > 0 {
		n, _, k := protowire.ConsumeField(b)
		if k < 0 {
			t.Fatalf("record does not parse: %v", protowire.ParseError(k))
		}
		if n != num {
			out = append(out, b[:k]...)
		}
		b = b[k:]
	}
	return out
}

// TestPatch runs patches on each backend: one field of ten, an indexed
// field, unique values, missing records, overflow, clearing, unknown
// fields, repeated keys, mixed operations, refusals and Watch.
func TestPatch(t *testing.T) {
	for _, be := range versionBackends() {
		t.Run(be.name, func(t *testing.T) {
			cfg := be.cfg(t)
			cfg.MetricsAddr = "127.0.0.1:0"
			ts := startServer(t, cfg)
			ts.MustApply(map[string]string{"pt.proto": patchProto})
			ts.MustWrite(insert, []*anypb.Any{
				ts.Rec("pt.Account", accountJSON(1, "Ann", "ann@x", "Oslo")),
				ts.Rec("pt.Account", accountJSON(2, "Bob", "bob@x", "Rome")),
				ts.Rec("pt.Account", accountJSON(3, "Cy", "cy@x", "Rome")),
			})
			// One server per backend (an etcd member is slow to start): the
			// cases run in turn on it, each on the state the last left.
			for _, c := range []func(*testing.T, *testServer){
				patchOneField, patchIndexedField, patchUnique, patchMissing, patchOverflow, patchClear,
				patchKeyTwice, patchMixed, patchRefused, patchWatch, patchUnknownFields,
			} {
				c(t, ts)
			}
		})
	}
}

// Patching one field keeps every other field's bytes as they were: the
// stored record is the old one without the field, the new value after.
func patchOneField(t *testing.T, ts *testServer) {
	before := ts.account(1)
	rec := ts.Rec("pt.Account", `{"id": 1, "name": "Anna"}`)
	if err := ts.patch([]string{"name"}, nil, rec); err != nil {
		t.Fatal(err)
	}
	want := append(withoutField(t, before, 2), withoutField(t, rec.Value, 1)...)
	if got := ts.account(1); !bytes.Equal(got, want) {
		t.Fatalf("stored after the patch: %x, want %x", got, want)
	}
	ts.wantAccount(1, accountJSON(1, "Anna", "ann@x", "Oslo"))
}

// An index follows a patched field: the new value finds the record, the
// old one does not.
func patchIndexedField(t *testing.T, ts *testServer) {
	if err := ts.patch([]string{"city"}, nil, ts.Rec("pt.Account", `{"id": 1, "city": "Bergen"}`)); err != nil {
		t.Fatal(err)
	}
	if ids := ts.cityIDs("Bergen"); len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("accounts in Bergen: %v, want [1]", ids)
	}
	if ids := ts.cityIDs("Oslo"); len(ids) != 0 {
		t.Fatalf("accounts in Oslo after the move: %v, want none", ids)
	}
}

// A patch taking another record's unique value is ALREADY_EXISTS and
// applies nothing of its batch, within the batch too; a value freed by
// one record may be taken by a later one of the batch.
func patchUnique(t *testing.T, ts *testServer) {
	email := func(id int, e string) *anypb.Any {
		return ts.Rec("pt.Account", fmt.Sprintf(`{"id": %d, "email": %q}`, id, e))
	}
	before2, before3 := ts.account(2), ts.account(3)
	err := ts.patch([]string{"email"}, nil, email(3, "cy2@x"), email(2, "ann@x"))
	if we := servertest.WriteErr(t, err, codes.AlreadyExists); we.Record != 1 || we.Field != "email" {
		t.Fatalf("taking account 1's email: %v", we)
	}
	err = ts.patch([]string{"email"}, nil, email(2, "z@x"), email(3, "z@x"))
	if we := servertest.WriteErr(t, err, codes.AlreadyExists); we.Record != 1 {
		t.Fatalf("two patches taking one email: %v", we)
	}
	if !bytes.Equal(ts.account(2), before2) || !bytes.Equal(ts.account(3), before3) {
		t.Fatal("a refused batch changed a record")
	}
	// Swap 2's and 3's emails through a free one.
	if err := ts.patch([]string{"email"}, nil, email(2, "tmp@x"), email(3, "bob@x"), email(2, "cy@x")); err != nil {
		t.Fatal(err)
	}
	ts.wantAccount(2, accountJSON(2, "Bob", "cy@x", "Rome"))
	ts.wantAccount(3, accountJSON(3, "Cy", "bob@x", "Rome"))
	if err := ts.patch([]string{"email"}, nil, email(2, "tmp@x")); err != nil {
		t.Fatalf("the email freed in the batch: %v", err)
	}
	if err := ts.patch([]string{"email"}, nil, email(2, "bob2@x"), email(3, "cy2@x")); err != nil {
		t.Fatal(err)
	}
}

// Patching a missing record is NOT_FOUND; nothing of its batch applies.
func patchMissing(t *testing.T, ts *testServer) {
	before := ts.account(1)
	err := ts.patch([]string{"name"}, nil, ts.Rec("pt.Account", `{"id": 1, "name": "X"}`), ts.Rec("pt.Account", `{"id": 99, "name": "X"}`))
	if we := servertest.WriteErr(t, err, codes.NotFound); we.Record != 1 {
		t.Fatalf("patch of a missing record: %v", we)
	}
	if !bytes.Equal(ts.account(1), before) {
		t.Fatal("the refused batch patched account 1")
	}
}

// An add that overflows the field's own width is OUT_OF_RANGE naming the
// field, and nothing of its batch applies.
func patchOverflow(t *testing.T, ts *testServer) {
	before2 := ts.account(2)
	err := ts.patch(nil, []string{"small"}, ts.Rec("pt.Account", `{"id": 2, "small": 1}`),
		ts.Rec("pt.Account", fmt.Sprintf(`{"id": 1, "small": %d}`, math.MaxInt32-4)))
	if we := servertest.WriteErr(t, err, codes.OutOfRange); we.Record != 1 || we.Field != "small" {
		t.Fatalf("overflowing add: %v", we)
	}
	if !bytes.Equal(ts.account(2), before2) {
		t.Fatal("the refused batch patched account 2")
	}
	if err := ts.patch(nil, []string{"small", "score"}, ts.Rec("pt.Account", `{"id": 1, "small": -10, "score": 0.25}`)); err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(ts.Desc("pt.Account"))
	if err := proto.Unmarshal(ts.account(1), m); err != nil {
		t.Fatal(err)
	}
	if s, sc := servertest.FieldValue(m, "small").Int(), servertest.FieldValue(m, "score").Float(); s != -5 || sc != 1.75 {
		t.Fatalf("after adding -10 and 0.25: small %d, score %v; want -5, 1.75", s, sc)
	}
}

// A named field the record lacks is cleared, its index entry with it; a
// nested path clears inside the message and keeps the rest of it.
func patchClear(t *testing.T, ts *testServer) {
	if err := ts.patch([]string{"city", "tags", "address.zip"}, nil, ts.Rec("pt.Account", `{"id": 3}`)); err != nil {
		t.Fatal(err)
	}
	ts.wantAccount(3, `{"id": 3, "name": "Cy", "email": "cy2@x", "balance": 100, "visits": 3, "score": 1.5,
		"active": true, "address": {"street": "Main 1"}, "small": 5}`)
	for _, id := range ts.cityIDs("Rome") {
		if id == 3 {
			t.Fatal("account 3 is still found in Rome")
		}
	}
	if ids := ts.cityIDs(""); len(ids) != 1 || ids[0] != 3 {
		t.Fatalf("accounts with no city: %v, want [3]", ids)
	}
}

// Two patches of one key in a batch apply in order, the second to what the
// first left.
func patchKeyTwice(t *testing.T, ts *testServer) {
	if err := ts.patch(nil, []string{"balance", "visits"}, ts.Rec("pt.Account", `{"id": 2, "balance": 5, "visits": 1}`),
		ts.Rec("pt.Account", `{"id": 2, "balance": 7}`)); err != nil {
		t.Fatal(err)
	}
	ts.wantAccount(2, `{"id": 2, "name": "Bob", "email": "bob2@x", "city": "Rome", "balance": 112, "visits": 4,
		"score": 1.5, "active": true, "tags": ["a", "b"], "address": {"street": "Main 1", "zip": "0150"}, "small": 5}`)
}

// A batch of inserts, updates, removes and patches is atomic: a failing
// record applies none of them; the batch that passes applies each by its
// own rules, a patch of a key inserted earlier in it included, and the
// metrics count each record under its operation.
func patchMixed(t *testing.T, ts *testServer) {
	ops := []client.Op{client.Insert, client.Update, client.Remove, client.Patch, client.Patch}
	recs := []proto.Message{
		ts.Rec("pt.Account", accountJSON(10, "Di", "di@x", "Oslo")),
		ts.Rec("pt.Account", accountJSON(2, "Bo", "bo@x", "Oslo")),
		ts.Rec("pt.Account", `{"id": 3}`),
		ts.Rec("pt.Account", `{"id": 10, "name": "Dina"}`),
		ts.Rec("pt.Account", `{"id": 404, "name": "X"}`),
	}
	before := map[int][]byte{2: ts.account(2), 3: ts.account(3)}
	_, err := ts.apply(client.Batch{Ops: ops, Records: recs, Fields: []string{"name"}})
	if we := servertest.WriteErr(t, err, codes.NotFound); we.Record != 4 {
		t.Fatalf("a mixed batch patching a missing record: %v", we)
	}
	if ts.account(10) != nil || !bytes.Equal(ts.account(2), before[2]) || !bytes.Equal(ts.account(3), before[3]) {
		t.Fatal("the refused mixed batch applied some of its records")
	}
	fams := scrape(t, "http://"+ts.Srv.MetricsAddr()+"/metrics")
	if _, err := ts.apply(client.Batch{Ops: ops[:4], Records: recs[:4], Fields: []string{"name"}}); err != nil {
		t.Fatal(err)
	}
	ts.wantAccount(10, accountJSON(10, "Dina", "di@x", "Oslo"))
	ts.wantAccount(2, accountJSON(2, "Bo", "bo@x", "Oslo"))
	if ts.account(3) != nil {
		t.Fatal("account 3 survived its removal")
	}
	after := scrape(t, "http://"+ts.Srv.MetricsAddr()+"/metrics")
	for _, op := range []string{"insert", "update", "remove", "patch"} {
		l := map[string]string{"op": op}
		r0, _ := metricValue(fams, "protobase_write_op_records_total", l)
		r1, _ := metricValue(after, "protobase_write_op_records_total", l)
		b0, _ := metricValue(fams, "protobase_write_op_batches_total", l)
		b1, _ := metricValue(after, "protobase_write_op_batches_total", l)
		if r1-r0 != 1 || b1-b0 != 1 {
			t.Errorf("%s: the mixed batch counted %v records in %v batches, want 1 in 1", op, r1-r0, b1-b0)
		}
	}
	// Ops that all agree run as a batch of that operation.
	if _, err := ts.apply(client.Batch{Ops: []client.Op{client.Patch}, Records: []proto.Message{ts.Rec("pt.Account", `{"id": 10, "name": "Dee"}`)},
		Fields: []string{"name"}}); err != nil {
		t.Fatal(err)
	}
}

// Bad patches and operations are INVALID_ARGUMENT naming what is wrong.
func patchRefused(t *testing.T, ts *testServer) {
	rec := ts.Rec("pt.Account", `{"id": 1, "name": "X"}`)
	recs := []proto.Message{rec}
	for _, c := range []struct {
		name  string
		b     client.Batch
		field string
	}{
		{"fields on an insert", client.Batch{Op: client.Insert, Records: recs, Fields: []string{"name"}}, ""},
		{"add on an update", client.Batch{Op: client.Update, Records: recs, Add: []string{"balance"}}, ""},
		{"a patch naming no field", client.Batch{Op: client.Patch, Records: recs}, ""},
		{"the primary key", client.Batch{Op: client.Patch, Records: recs, Fields: []string{"id"}}, "id"},
		{"add on a string", client.Batch{Op: client.Patch, Records: recs, Add: []string{"name"}}, "name"},
		{"no such field", client.Batch{Op: client.Patch, Records: recs, Fields: []string{"address.nope"}}, "address.nope"},
		{"through a repeated field", client.Batch{Op: client.Patch, Records: recs, Fields: []string{"tags.x"}}, "tags.x"},
		{"named twice", client.Batch{Op: client.Patch, Records: recs, Fields: []string{"name"}, Add: []string{"name"}}, "name"},
		{"ops of another length", client.Batch{Ops: []client.Op{client.Patch, client.Patch}, Records: recs, Fields: []string{"name"}}, ""},
		{"an unknown op", client.Batch{Ops: []client.Op{client.Op(42)}, Records: recs}, ""},
		{"fields with no patched record", client.Batch{Ops: []client.Op{client.Update}, Records: recs, Fields: []string{"name"}}, ""},
	} {
		_, err := ts.apply(c.b)
		if we := servertest.WriteErr(t, err, codes.InvalidArgument); we.Field != c.field {
			t.Errorf("%s: %v, want field %q named", c.name, we, c.field)
		}
	}
}

// Watch reports a patch as an update carrying the whole new record, and
// the old one when asked.
func patchWatch(t *testing.T, ts *testServer) {
	ws := ts.watch(&pb.WatchRequest{Types: []string{"pt.Account"}, OldRecords: true})
	ws.first()
	old := ts.account(1)
	if err := ts.patch([]string{"name"}, []string{"balance"}, ts.Rec("pt.Account", `{"id": 1, "name": "Annie", "balance": 1}`)); err != nil {
		t.Fatal(err)
	}
	url := "type.googleapis.com/pt.Account"
	checkChange(t, ws.next(1)[0], pb.ChangeOp_CHANGE_OP_UPDATE, "pt.Account",
		&anypb.Any{TypeUrl: url, Value: ts.account(1)}, &anypb.Any{TypeUrl: url, Value: old})
}

// A field the schema no longer declares stays in the stored bytes
// through a patch.
func patchUnknownFields(t *testing.T, ts *testServer) {
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("pt.Note", `{"id": 1, "text": "t", "draft": "keep me"}`)})
	ts.MustApply(map[string]string{"pt.proto": patchProtoLater})
	ts.ForgetDescriptors()
	if err := ts.patch([]string{"text"}, nil, ts.Rec("pt.Note", `{"id": 1, "text": "t2"}`)); err != nil {
		t.Fatal(err)
	}
	recs, err := ts.C.Get(context.Background(), "pt.Note", 1)
	if err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(ts.Desc("pt.Note"))
	if err := proto.Unmarshal(recs[0].Value, m); err != nil {
		t.Fatal(err)
	}
	draft := protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "keep me")
	if servertest.FieldValue(m, "text").String() != "t2" || !bytes.Equal(m.GetUnknown(), draft) {
		t.Fatalf("note after the patch: %v, unknown %x; want text t2 and the draft kept (%x)", m, m.GetUnknown(), draft)
	}
}

// TestPatchCounterShared has two servers sharing one etcd store patch one
// counter at once: each patch's read of the stored record is a
// precondition of its transaction, so a patch that lost the race to the
// other server is checked again on fresh reads, and none is lost. A batch
// that kept losing comes back ABORTED, having applied nothing, and the
// client sends it again.
func TestPatchCounterShared(t *testing.T) {
	cfg := server.Config{Store: server.StoreEtcd, Etcd: server.EtcdConfig{
		Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/patch/"}}
	a := startServer(t, withDir(t, cfg))
	a.MustApply(map[string]string{"pt.proto": patchProto})
	a.MustWrite(insert, []*anypb.Any{a.Rec("pt.Account", `{"id": 1}`)})
	b := startServer(t, withDir(t, cfg))
	const perServer, each = 4, 50
	one := a.Rec("pt.Account", `{"id": 1, "balance": 1}`)
	var wg sync.WaitGroup
	errs := make(chan error, 2*perServer)
	for _, ts := range []*testServer{a, b} {
		for range perServer {
			wg.Go(func() {
				for range each {
					for {
						_, err := ts.C.Apply(context.Background(), client.Batch{Op: client.Patch, Records: []proto.Message{one}, Add: []string{"balance"}})
						if status.Code(err) == codes.Aborted {
							continue
						}
						if err != nil {
							errs <- err
							return
						}
						break
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(a.Desc("pt.Account"))
	if err := proto.Unmarshal(a.account(1), m); err != nil {
		t.Fatal(err)
	}
	if got := servertest.FieldValue(m, "balance").Int(); got != 2*perServer*each {
		t.Fatalf("counter after %d adds of 1 through two servers: %d", 2*perServer*each, got)
	}
}

// TestPatchCounter has 16 clients add 1 to one counter, each with its own
// single-record patches: the counter ends at exactly the number sent. On
// etcd each client sends 100 (a batch there is a Raft round trip).
func TestPatchCounter(t *testing.T) {
	for _, be := range versionBackends() {
		t.Run(be.name, func(t *testing.T) {
			const clients = 16
			each := 1000
			if be.name == "etcd" || testing.Short() {
				each = 100
			}
			ts := startServer(t, be.cfg(t))
			ts.MustApply(map[string]string{"pt.proto": patchProto})
			ts.MustWrite(insert, []*anypb.Any{ts.Rec("pt.Account", `{"id": 1}`)})
			one := ts.Rec("pt.Account", `{"id": 1, "balance": 1}`)
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for range clients {
				wg.Go(func() {
					c, err := client.Dial(ts.Srv.Addr())
					if err != nil {
						errs <- err
						return
					}
					defer c.Close()
					for range each {
						if _, err := c.Apply(context.Background(), client.Batch{Op: client.Patch, Records: []proto.Message{one}, Add: []string{"balance"}}); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			m := dynamicpb.NewMessage(ts.Desc("pt.Account"))
			if err := proto.Unmarshal(ts.account(1), m); err != nil {
				t.Fatal(err)
			}
			if got := servertest.FieldValue(m, "balance").Int(); got != int64(clients*each) {
				t.Fatalf("counter after %d adds of 1: %d", clients*each, got)
			}
		})
	}
}

// Patches cannot make what the server could not take whole: a patched
// record larger than the largest message is RESOURCE_EXHAUSTED (it could
// not be read back), and so is a batch whose patched records together
// pass that size, however small its patches; nothing of either applies.
func TestPatchSizeBounds(t *testing.T) {
	const limit = 256 << 10
	ts := startServer(t, server.Config{MaxMessageBytes: limit})
	ts.MustApply(map[string]string{"pt.proto": patchProto})
	big := strings.Repeat("n", 100<<10)
	for id := 1; id <= 3; id++ {
		ts.MustWrite(insert, []*anypb.Any{ts.Rec("pt.Account", fmt.Sprintf(`{"id": %d, "name": %q, "email": "%d@x"}`, id, big, id))})
	}
	before := [][]byte{ts.account(1), ts.account(2), ts.account(3)}
	for _, c := range []struct {
		name string
		recs []proto.Message
	}{
		{"a record grown past the limit", []proto.Message{ts.Rec("pt.Account", fmt.Sprintf(`{"id": 1, "city": %q}`, strings.Repeat("c", 200<<10)))}},
		{"a batch of records past it together", []proto.Message{
			ts.Rec("pt.Account", `{"id": 1, "city": "a"}`), ts.Rec("pt.Account", `{"id": 2, "city": "b"}`), ts.Rec("pt.Account", `{"id": 3, "city": "c"}`)}},
	} {
		_, err := ts.C.Apply(context.Background(), client.Batch{Op: client.Patch, Records: c.recs, Fields: []string{"city"}})
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED", c.name, err)
		}
		for i, b := range before {
			if !bytes.Equal(ts.account(i+1), b) {
				t.Fatalf("%s: account %d changed", c.name, i+1)
			}
		}
	}
	// Within the bounds the same patches apply.
	if _, err := ts.C.Apply(context.Background(), client.Batch{Op: client.Patch, Fields: []string{"city"},
		Records: []proto.Message{ts.Rec("pt.Account", `{"id": 1, "city": "a"}`), ts.Rec("pt.Account", `{"id": 2, "city": "b"}`)}}); err != nil {
		t.Fatal(err)
	}
}
