package client_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// startSearchServer starts a server on loopback holding the shop.User
// records 0..n-1, with emails in the order of their ids.
func startSearchServer(tb testing.TB, n int) *client.Client {
	tb.Helper()
	_, c := startSearchServerAddr(tb, n)
	return c
}

// startSearchServerAddr is startSearchServer, returning the server's
// address too.
func startSearchServerAddr(tb testing.TB, n int) (string, *client.Client) {
	tb.Helper()
	srv, err := server.Start(context.Background(), server.Config{DataDir: tb.TempDir(), GRPCAddr: "127.0.0.1:0", NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(srv.Addr())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if _, err := c.ApplySchema(ctx, map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		tb.Fatal(err)
	}
	w, err := c.NewWriter(ctx, client.Insert, client.WriterOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	for id := range n {
		if err := w.WriteAny(user(int64(id), email(id))); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return srv.Addr(), c
}

func email(id int) string { return fmt.Sprintf("u%08d@x", id) }

// userID decodes the id of a shop.User record.
func userID(tb testing.TB, a *anypb.Any) int64 {
	tb.Helper()
	num, typ, n := protowire.ConsumeTag(a.Value)
	if n < 0 || num != 1 || typ != protowire.VarintType {
		tb.Fatalf("record %x: no id first", a.Value)
	}
	id, m := protowire.ConsumeVarint(a.Value[n:])
	if m < 0 {
		tb.Fatalf("record %x: bad id", a.Value)
	}
	return int64(id)
}

func emailRange(lo, hi int) *pb.Query {
	return &pb.Query{Type: "shop.User", Where: client.And(client.Ge("email", email(lo)), client.Lt("email", email(hi)))}
}

// TestSearchRecordsStayValid reads primary-key lookups and an index range
// on one stream, keeps every record, and checks them only after the
// stream has received all of its responses and closed: a record must not
// change when later responses arrive (they never reuse its bytes).
func TestSearchRecordsStayValid(t *testing.T) {
	const n = 3000
	c := startSearchServer(t, n)
	s, err := c.NewSearch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var qs []*pb.Query
	for id := 0; id < n; id += 7 {
		qs = append(qs, &pb.Query{Type: "shop.User", Where: client.Eq("id", id)})
	}
	lookups, err := s.Batch(qs)
	if err != nil {
		t.Fatal(err)
	}
	rangeQ := emailRange(100, 2100)
	rangeQ.Explain = true
	ranged, err := s.Query(rangeQ)
	if err != nil {
		t.Fatal(err)
	}
	missing, err := s.Query(&pb.Query{Type: "demo.NoSuchType"})
	if err != nil {
		t.Fatal(err)
	}
	var kept [][]*anypb.Any
	for _, r := range lookups {
		recs, err := r.All()
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, recs)
	}
	rangeRecs, err := ranged.All()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := missing.All(); err == nil {
		t.Fatal("a query of an unknown type succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The results of lookups answered in one response share its memory:
	// appending to one query's must not write over the next one's.
	for _, recs := range kept {
		_ = append(recs, nil)
	}
	for i, recs := range kept {
		if len(recs) != 1 || userID(t, recs[0]) != int64(i*7) || recs[0].TypeUrl != "type.googleapis.com/shop.User" {
			t.Fatalf("lookup of id %d: %v", i*7, recs)
		}
	}
	if len(rangeRecs) != 2000 {
		t.Fatalf("range read %d records, want 2000", len(rangeRecs))
	}
	for i, r := range rangeRecs {
		if got := userID(t, r); got != int64(100+i) {
			t.Fatalf("range record %d has id %d, want %d", i, got, 100+i)
		}
	}
	if p := ranged.Plan(); p.GetAccess() != "index_range" {
		t.Fatalf("range plan %v, want index_range", p)
	}
}

// BenchmarkSearch measures the Go client's Search against a real server
// on loopback holding 100,000 records: a batch of 1,000 primary-key
// lookups, and one index range of all 100,000 records, each read whole
// by Results.All. Decoding is a large part of the client's work here, so
// allocs/op show it.
func BenchmarkSearch(b *testing.B) {
	const n = 100_000
	c := startSearchServer(b, n)
	s, err := c.NewSearch(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.Run("pk-lookups=1000", func(b *testing.B) {
		qs := make([]*pb.Query, 1000)
		for i := range qs {
			qs[i] = &pb.Query{Type: "shop.User", Where: client.Eq("id", (i*97)%n)}
		}
		b.ReportAllocs()
		for b.Loop() {
			rs, err := s.Batch(qs)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rs {
				if recs, err := r.All(); err != nil || len(recs) != 1 {
					b.Fatalf("lookup: %d records, %v", len(recs), err)
				}
			}
		}
		b.ReportMetric(float64(b.N*len(qs))/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("index-range=100000", func(b *testing.B) {
		q := emailRange(0, n)
		b.ReportAllocs()
		for b.Loop() {
			r, err := s.Query(q)
			if err != nil {
				b.Fatal(err)
			}
			if recs, err := r.All(); err != nil || len(recs) != n {
				b.Fatalf("range: %d records, %v", len(recs), err)
			}
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
	})
}
