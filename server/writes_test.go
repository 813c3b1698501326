package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

const (
	insert = pb.WriteOp_WRITE_OP_INSERT
	update = pb.WriteOp_WRITE_OP_UPDATE
	upsert = pb.WriteOp_WRITE_OP_UPSERT
	remove = pb.WriteOp_WRITE_OP_REMOVE
)

func TestWriteOperationsAcrossTypes(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})

	// Records of two types share a batch.
	resp := ts.MustWrite(insert, []*anypb.Any{
		ts.Rec("shop.User", `{"id": 1, "name": "Ann", "email": "ann@example.com"}`),
		ts.Rec("shop.Order", `{"userId": 1, "id": 10, "total": 9.5, "line": {"sku": "A", "qty": 2}}`),
		ts.Rec("shop.User", `{"id": 2, "name": "Bob", "email": "bob@example.com"}`),
	}, []*anypb.Any{
		ts.Rec("shop.Order", `{"userId": 1, "id": 11}`),
	})
	if resp.Batches != 2 || resp.Records != 4 || resp.Position == 0 {
		t.Fatalf("insert response %v", resp)
	}
	if n := ts.Count("shop.User"); n != 2 {
		t.Fatalf("users: %d", n)
	}
	if n := ts.Count("shop.Order"); n != 2 {
		t.Fatalf("orders: %d", n)
	}

	// Insert of an existing key.
	_, err := ts.Write(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "x@example.com"}`)})
	we := servertest.WriteErr(t, err, codes.AlreadyExists)
	if we.Batch != 0 || we.Record != 0 || we.Field != "id" {
		t.Fatalf("detail %v", we)
	}

	// Update of a missing key.
	_, err = ts.Write(update, []*anypb.Any{ts.Rec("shop.User", `{"id": 3}`)})
	servertest.WriteErr(t, err, codes.NotFound)

	// Update, upsert (one existing, one new), remove.
	ts.MustWrite(update, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "name": "Anna", "email": "anna@example.com"}`)})
	ts.MustWrite(upsert, []*anypb.Any{
		ts.Rec("shop.User", `{"id": 2, "name": "Bobby", "email": "bob@example.com"}`),
		ts.Rec("shop.User", `{"id": 3, "name": "Cy", "email": "cy@example.com"}`),
	})
	ts.MustWrite(remove, []*anypb.Any{ts.Rec("shop.Order", `{"userId": 1, "id": 10}`)})

	users := ts.Records("shop.User")
	var got []string
	for _, u := range users {
		got = append(got, fmt.Sprintf("%d:%s:%s", servertest.FieldValue(u, "id").Int(), servertest.FieldValue(u, "name").String(), servertest.FieldValue(u, "email").String()))
	}
	want := "[1:Anna:anna@example.com 2:Bobby:bob@example.com 3:Cy:cy@example.com]"
	if fmt.Sprint(got) != want {
		t.Fatalf("users %v, want %v", got, want)
	}
	orders := ts.Records("shop.Order")
	if len(orders) != 1 || servertest.FieldValue(orders[0], "id").Uint() != 11 {
		t.Fatalf("orders after remove: %v", orders)
	}

	// Remove of a missing key.
	_, err = ts.Write(remove, []*anypb.Any{ts.Rec("shop.Order", `{"userId": 1, "id": 10}`)})
	servertest.WriteErr(t, err, codes.NotFound)
}

func TestStopOnFirstInvalidRecord(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})

	good := func(id int) *anypb.Any {
		return ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "u%d@example.com"}`, id, id))
	}
	bad := &anypb.Any{TypeUrl: "type.googleapis.com/shop.User", Value: []byte{0x12, 0x02, 0xff, 0xfe}} // name: invalid UTF-8
	_, err := ts.Write(insert,
		[]*anypb.Any{good(1), good(2)},
		[]*anypb.Any{good(3), good(4), bad, good(5)},
		[]*anypb.Any{good(6)},
	)
	we := servertest.WriteErr(t, err, codes.InvalidArgument)
	if we.Batch != 1 || we.Record != 2 || we.Field != "name" || we.RecordsApplied != 2 || we.BatchesApplied != 1 {
		t.Fatalf("detail %v", we)
	}
	// Everything of batch 0, nothing of batch 1 or later.
	var ids []int64
	for _, u := range ts.Records("shop.User") {
		ids = append(ids, servertest.FieldValue(u, "id").Int())
	}
	if fmt.Sprint(ids) != "[1 2]" {
		t.Fatalf("stored ids %v, want [1 2]", ids)
	}
}

func TestUniqueIndex(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(insert, []*anypb.Any{
		ts.Rec("shop.User", `{"id": 1, "email": "a@example.com"}`),
		ts.Rec("shop.User", `{"id": 2, "email": "b@example.com"}`),
	})

	cases := []struct {
		name   string
		op     pb.WriteOp
		recs   []string
		code   codes.Code
		record uint64
	}{
		{"insert takes a used email", insert, []string{`{"id": 3, "email": "a@example.com"}`}, codes.AlreadyExists, 0},
		{"two records of one batch share an email", insert, []string{`{"id": 3, "email": "c@example.com"}`, `{"id": 4, "email": "c@example.com"}`}, codes.AlreadyExists, 1},
		{"update takes another's email", update, []string{`{"id": 2, "email": "a@example.com"}`}, codes.AlreadyExists, 0},
		{"upsert takes another's email", upsert, []string{`{"id": 5, "email": "b@example.com"}`}, codes.AlreadyExists, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var recs []*anypb.Any
			for _, r := range tc.recs {
				recs = append(recs, ts.Rec("shop.User", r))
			}
			_, err := ts.Write(tc.op, recs)
			we := servertest.WriteErr(t, err, tc.code)
			if we.Record != tc.record || we.Field != "email" {
				t.Fatalf("detail %v", we)
			}
		})
	}
	if n := ts.Count("shop.User"); n != 2 {
		t.Fatalf("failed writes changed data: %d users", n)
	}

	// A record keeps its own email on update; an email freed by an update
	// or a remove can be taken, within one batch too.
	ts.MustWrite(update, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "name": "x", "email": "a@example.com"}`)})
	ts.MustWrite(upsert, []*anypb.Any{
		ts.Rec("shop.User", `{"id": 1, "email": "a2@example.com"}`),
		ts.Rec("shop.User", `{"id": 3, "email": "a@example.com"}`),
	})
	ts.MustWrite(remove, []*anypb.Any{ts.Rec("shop.User", `{"id": 2}`)})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 4, "email": "b@example.com"}`)})
	_, err := ts.Write(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 5, "email": "a2@example.com"}`)})
	servertest.WriteErr(t, err, codes.AlreadyExists)
}

func TestSameKeyTwiceInOneBatch(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	_, err := ts.Write(insert, []*anypb.Any{
		ts.Rec("shop.User", `{"id": 1, "email": "a@example.com"}`),
		ts.Rec("shop.User", `{"id": 1, "email": "b@example.com"}`),
	})
	if we := servertest.WriteErr(t, err, codes.AlreadyExists); we.Record != 1 {
		t.Fatalf("detail %v", we)
	}
	// Upserting one key twice keeps the last, and its index entries.
	ts.MustWrite(upsert, []*anypb.Any{
		ts.Rec("shop.User", `{"id": 1, "email": "a@example.com"}`),
		ts.Rec("shop.User", `{"id": 1, "email": "b@example.com"}`),
	})
	users := ts.Records("shop.User")
	if len(users) != 1 || servertest.FieldValue(users[0], "email").String() != "b@example.com" {
		t.Fatalf("users %v", users)
	}
	// a@ was released by the second upsert; b@ is taken.
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 2, "email": "a@example.com"}`)})
	_, err = ts.Write(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 3, "email": "b@example.com"}`)})
	servertest.WriteErr(t, err, codes.AlreadyExists)
}

func TestWriteStreamAcknowledgements(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ctx := t.Context()
	st, err := ts.C.API().Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(op pb.WriteOp, ack bool, recs ...*anypb.Any) {
		if err := st.Send(&pb.WriteStreamRequest{Op: op, Records: recs, Ack: ack}); err != nil {
			t.Fatal(err)
		}
	}
	send(insert, false, ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`))
	send(upsert, true, ts.Rec("shop.User", `{"id": 2, "email": "b@x"}`), ts.Rec("shop.User", `{"id": 1, "email": "c@x"}`))
	ack, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if ack.Batch != 1 || ack.Records != 3 || ack.Position == 0 {
		t.Fatalf("ack %v", ack)
	}
	send(remove, true, ts.Rec("shop.User", `{"id": 2}`))
	ack2, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if ack2.Batch != 2 || ack2.Position <= ack.Position {
		t.Fatalf("second ack %v after %v", ack2, ack)
	}
	send(insert, false, ts.Rec("shop.User", `{"id": 1}`)) // duplicate: ends the stream
	_, err = st.Recv()
	if we := servertest.WriteErr(t, err, codes.AlreadyExists); we.Batch != 3 || we.RecordsApplied != 4 {
		t.Fatalf("detail %v", we)
	}
	if n := ts.Count("shop.User"); n != 1 {
		t.Fatalf("users %d", n)
	}
}

// TestWriteStreamBadOp checks that a batch without a write operation
// fails like any other bad batch: named, with the counts applied before it,
// which stay applied.
func TestWriteStreamBadOp(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	st, err := ts.C.API().Write(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []*pb.WriteStreamRequest{
		{Op: insert, Records: []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "email": "a@x"}`), ts.Rec("shop.User", `{"id": 2, "email": "b@x"}`)}},
		{Op: pb.WriteOp_WRITE_OP_UNSPECIFIED, Records: []*anypb.Any{ts.Rec("shop.User", `{"id": 3, "email": "c@x"}`)}},
	} {
		if err := st.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	_, err = st.Recv()
	we := servertest.WriteErr(t, err, codes.InvalidArgument)
	if we.Batch != 1 || we.BatchesApplied != 1 || we.RecordsApplied != 2 || !strings.Contains(we.Reason, "not a write operation") {
		t.Fatalf("detail %v", we)
	}
	if n := ts.Count("shop.User"); n != 2 {
		t.Fatalf("users %d, want the first batch's 2", n)
	}
}

func TestDataSurvivesRestart(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 7, "email": "s@x"}`)})
	before, err := ts.C.GetSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ts = ts.restart()
	after, err := ts.C.GetSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version || after.Files["shop.proto"] != shopProto {
		t.Fatalf("schema after restart: version %d (want %d)", after.Version, before.Version)
	}
	if n := ts.Count("shop.User"); n != 1 {
		t.Fatalf("users after restart: %d", n)
	}
	// The unique index survived too.
	_, err = ts.Write(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 8, "email": "s@x"}`)})
	servertest.WriteErr(t, err, codes.AlreadyExists)
}

// TestWriteStreamPipelinedAcknowledgements sends many batches, most asking
// for an acknowledgement, without waiting for any, then a duplicate that
// fails: every acknowledgement arrives, in order, for the batches that
// asked, with the records applied up to each and rising positions, before
// the error that names the failed batch; what was acknowledged is stored.
func TestWriteStreamPipelinedAcknowledgements(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	st, err := ts.C.API().Write(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const batches, per = 60, 3
	var want []uint64 // batches that ask
	for b := 0; b < batches; b++ {
		recs := make([]*anypb.Any, per)
		for i := range recs {
			id := b*per + i
			recs[i] = ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "u%d@x"}`, id, id))
		}
		ack := b%5 != 4
		if ack {
			want = append(want, uint64(b))
		}
		if err := st.Send(&pb.WriteStreamRequest{Op: insert, Records: recs, Ack: ack}); err != nil {
			t.Fatal(err)
		}
	}
	dup := &pb.WriteStreamRequest{Op: insert, Ack: true, Records: []*anypb.Any{ts.Rec("shop.User", `{"id": 0}`)}}
	if err := st.Send(dup); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i, b := range want {
		ack, err := st.Recv()
		if err != nil {
			t.Fatalf("acknowledgement %d (batch %d): %v", i, b, err)
		}
		if ack.Batch != b || ack.Records != (b+1)*per || ack.Position <= last {
			t.Fatalf("acknowledgement %d: %v, want batch %d with %d records after position %d", i, ack, b, (b+1)*per, last)
		}
		last = ack.Position
	}
	_, err = st.Recv()
	if we := servertest.WriteErr(t, err, codes.AlreadyExists); we.Batch != batches || we.RecordsApplied != batches*per {
		t.Fatalf("detail %v", we)
	}
	if n := ts.Count("shop.User"); n != batches*per {
		t.Fatalf("users %d, want %d", n, batches*per)
	}
}

// TestWriteStreamBurstsAndWaits runs streams that alternate between
// waiting for each batch's acknowledgement and sending bursts of batches
// without waiting, so that a batch arrives both while the stream's
// handler waits with nothing to do and while it is busy: every
// acknowledgement names the last batch sent with the records up to it,
// a duplicate on an idle stream ends it naming that batch, and the
// clean streams end without error.
func TestWriteStreamBurstsAndWaits(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	const streams, rounds = 8, 30
	errs := make(chan error, streams)
	for s := range streams {
		go func() { errs <- burstsAndWaits(ts, s, rounds) }()
	}
	for range streams {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	want := 0
	for r := range rounds {
		want += r%3 + 1
	}
	if n := ts.Count("shop.User"); n != streams*want {
		t.Errorf("users %d, want %d", n, streams*want)
	}
	// A duplicate sent to a stream waiting for its next batch fails it.
	st, err := ts.C.API().Write(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&pb.WriteStreamRequest{Op: insert, Ack: true, Records: []*anypb.Any{ts.Rec("shop.User", `{"id": 1000000, "email": "n@x"}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&pb.WriteStreamRequest{Op: insert, Ack: true, Records: []*anypb.Any{ts.Rec("shop.User", `{"id": 0}`)}}); err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	if we := servertest.WriteErr(t, err, codes.AlreadyExists); we.Batch != 1 || we.BatchesApplied != 1 || we.RecordsApplied != 1 {
		t.Fatalf("detail %v", we)
	}
}

// burstsAndWaits is one stream of TestWriteStreamBurstsAndWaits: round r
// sends r%3+1 one-record batches, the last asking for an acknowledgement,
// and waits for it.
func burstsAndWaits(ts *testServer, s, rounds int) error {
	st, err := ts.C.API().Write(context.Background())
	if err != nil {
		return err
	}
	var sent uint64
	for r := range rounds {
		n := r%3 + 1
		for i := range n {
			id := s*1000 + int(sent)
			rec := ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "s%d@x"}`, id, id))
			if err := st.Send(&pb.WriteStreamRequest{Op: insert, Ack: i == n-1, Records: []*anypb.Any{rec}}); err != nil {
				return fmt.Errorf("stream %d: send: %w", s, err)
			}
			sent++
		}
		ack, err := st.Recv()
		if err != nil {
			return fmt.Errorf("stream %d round %d: %w", s, r, err)
		}
		if ack.Batch != sent-1 || ack.Records != sent {
			return fmt.Errorf("stream %d round %d: acknowledgement %v after %d batches", s, r, ack, sent)
		}
	}
	if err := st.CloseSend(); err != nil {
		return err
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("stream %d: end: %w", s, err)
	}
	return nil
}
