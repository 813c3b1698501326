package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/export"
	"github.com/protobase/protobase/server"
)

const salesProto = `syntax = "proto3";
package sales;
import "protobase/v1/options.proto";
message Order {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "user" } };
  int64 id = 1;
  int64 user = 2;
  repeated string items = 3;
}
`

func order(id, user int64) *anypb.Any {
	b := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(id))
	b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), uint64(user))
	b = protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), fmt.Sprintf("item-%d", id))
	return &anypb.Any{TypeUrl: "type.googleapis.com/sales.Order", Value: b}
}

// startExportServer starts an empty server on its own data directory.
func startExportServer(t *testing.T, cfg server.Config) (*server.Server, *client.Client) {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.GRPCAddr = "127.0.0.1:0"
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

// fillExportServer applies users and orders and writes nUsers users and
// nOrders orders.
func fillExportServer(t *testing.T, c *client.Client, nUsers, nOrders int) {
	t.Helper()
	files := map[string]string{"shop.proto": shopProto, "sales.proto": salesProto}
	if _, err := c.ApplySchema(t.Context(), files, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := c.NewWriter(t.Context(), client.Insert, client.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Ids from 1 and no zero fields: records in canonical encoding, which
	// the JSON format (re-encoding each record) keeps byte for byte too.
	for i := range nUsers {
		if err := w.WriteAny(user(int64(i+1), fmt.Sprintf("u%d@x", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range nOrders {
		if err := w.WriteAny(order(int64(i+1), int64(i%7+1))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// scanAll returns the raw records of every type, in type then key order.
func scanAll(t *testing.T, c *client.Client, types ...string) []*anypb.Any {
	t.Helper()
	var out []*anypb.Any
	for _, typ := range types {
		s := c.Scan(t.Context(), &pb.Query{Type: typ}, client.ScanOptions{})
		for s.Next() {
			out = append(out, s.Record())
		}
		if err := s.Err(); err != nil {
			t.Fatalf("scan %s: %v", typ, err)
		}
	}
	return out
}

func sameRecords(t *testing.T, got, want []*anypb.Any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].GetTypeUrl() != want[i].GetTypeUrl() || !bytes.Equal(got[i].GetValue(), want[i].GetValue()) {
			t.Fatalf("record %d is %s %x, want %s %x", i, got[i].GetTypeUrl(), got[i].GetValue(), want[i].GetTypeUrl(), want[i].GetValue())
		}
	}
}

// sameMessages compares records as messages: the JSON format re-encodes
// each record, and dynamic messages need not write fields in the order
// the original bytes had them.
func sameMessages(c *client.Client) func(t *testing.T, got, want []*anypb.Any) {
	return func(t *testing.T, got, want []*anypb.Any) {
		t.Helper()
		types, err := c.Types(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d records, want %d", len(got), len(want))
		}
		for i := range want {
			g, err1 := types.Message(got[i])
			w, err2 := types.Message(want[i])
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(g, w) {
				t.Fatalf("record %d is %v, want %v", i, g, w)
			}
		}
	}
}

// Export, then import into a fresh server, in both formats: every record
// of every type comes back (byte for byte from the binary format), and the
// schema is the same.
func TestExportImportRoundTrip(t *testing.T) {
	_, src := startExportServer(t, server.Config{MaxResultRecords: 100})
	fillExportServer(t, src, 2500, 300)
	want := scanAll(t, src, "sales.Order", "shop.User")
	for _, format := range []client.ExportFormat{client.ExportBinary, client.ExportJSON} {
		t.Run(format.String(), func(t *testing.T) {
			var file bytes.Buffer
			n, err := src.Export(t.Context(), nil, &file, format)
			if err != nil || n != 2800 {
				t.Fatalf("export: %d records, %v", n, err)
			}
			_, dst := startExportServer(t, server.Config{})
			res, err := dst.Import(t.Context(), bytes.NewReader(file.Bytes()), client.ImportOptions{Batch: 100})
			if err != nil {
				t.Fatal(err)
			}
			if res.Records != 2800 || res.Written != 2800 || !res.Schema.GetApplied() {
				t.Fatalf("import: %+v", res)
			}
			same := sameRecords
			if format == client.ExportJSON {
				same = sameMessages(src)
			}
			same(t, scanAll(t, dst, "sales.Order", "shop.User"), want)
			// Again into the same server: the schema is unchanged and the
			// records are upserted, never duplicated.
			res, err = dst.Import(t.Context(), bytes.NewReader(file.Bytes()), client.ImportOptions{Batch: 100})
			if err != nil {
				t.Fatal(err)
			}
			if res.Schema.GetApplied() {
				t.Fatalf("a second import changed the schema: %v", res.Schema.GetPlan())
			}
			same(t, scanAll(t, dst, "sales.Order", "shop.User"), want)
		})
	}

	// One type only.
	var file bytes.Buffer
	if n, err := src.Export(t.Context(), []string{"sales.Order"}, &file, client.ExportBinary); err != nil || n != 300 {
		t.Fatalf("export of sales.Order: %d records, %v", n, err)
	}
	_, err := src.Export(t.Context(), []string{"demo.Nope"}, &bytes.Buffer{}, client.ExportBinary)
	wantCode(t, err, codes.NotFound)
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status.Code() != code {
		t.Fatalf("got %v, want %v", err, code)
	}
}

// An import cancelled after some batches, then run again from its
// progress: every record is there once, and the rerun sent only the rest.
func TestImportResumes(t *testing.T) {
	_, src := startExportServer(t, server.Config{})
	fillExportServer(t, src, 2500, 300)
	want := scanAll(t, src, "sales.Order", "shop.User")
	var file bytes.Buffer
	if _, err := src.Export(t.Context(), nil, &file, client.ExportBinary); err != nil {
		t.Fatal(err)
	}
	_, dst := startExportServer(t, server.Config{})

	ctx, cancel := context.WithCancel(t.Context())
	var progress uint64
	_, err := dst.Import(ctx, bytes.NewReader(file.Bytes()), client.ImportOptions{Batch: 50, Progress: func(n uint64) error {
		if n < progress {
			t.Errorf("progress went back from %d to %d", progress, n)
		}
		progress = n
		cancel() // the interruption, once some batches are durable
		return nil
	}})
	if err == nil {
		t.Fatal("the cancelled import succeeded")
	}
	if progress == 0 || progress >= 2800 {
		t.Fatalf("progress after the interruption is %d", progress)
	}
	if got := len(scanAll(t, dst, "sales.Order", "shop.User")); uint64(got) < progress {
		t.Fatalf("%d records stored, but progress said %d were durable", got, progress)
	}

	skip := progress
	res, err := dst.Import(t.Context(), bytes.NewReader(file.Bytes()), client.ImportOptions{Batch: 50, Skip: skip,
		Progress: func(n uint64) error { progress = n; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if progress != 2800 || res.Records != 2800 || res.Written != 2800-skip {
		t.Fatalf("rerun: %+v, progress %d", res, progress)
	}
	sameRecords(t, scanAll(t, dst, "sales.Order", "shop.User"), want)

	// A progress count past the file's end is refused.
	_, err = dst.Import(t.Context(), bytes.NewReader(file.Bytes()), client.ImportOptions{Skip: 2801})
	if err == nil || !strings.Contains(err.Error(), "past the file's 2800 records") {
		t.Fatalf("import with skip 2801: %v", err)
	}
}

// A scoped key exports its scope's types and is refused any other.
func TestExportScopedKey(t *testing.T) {
	admin := "pb_" + strings.Repeat("a", 32)
	srv, c := startExportServer(t, server.Config{Auth: true, AdminKey: admin})
	ac, err := client.Dial(srv.Addr(), client.WithAPIKey(admin))
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	fillExportServer(t, ac, 10, 5)
	key, err := ac.API().CreateKey(t.Context(), &pb.CreateKeyRequest{Name: "orders", Role: pb.KeyRole_KEY_ROLE_READ, Types: []string{"sales.Order"}})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := client.Dial(srv.Addr(), client.WithAPIKey(key.GetKey()))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	_, err = sc.Export(t.Context(), []string{"shop.User"}, &bytes.Buffer{}, client.ExportBinary)
	wantCode(t, err, codes.PermissionDenied)
	_, err = sc.Export(t.Context(), []string{"sales.Order", "shop.User"}, &bytes.Buffer{}, client.ExportBinary)
	wantCode(t, err, codes.PermissionDenied)
	var file bytes.Buffer
	n, err := sc.Export(t.Context(), nil, &file, client.ExportBinary)
	if err != nil || n != 5 {
		t.Fatalf("scoped export: %d records, %v", n, err)
	}
	if bytes.Contains(file.Bytes(), []byte("u1@x")) || bytes.Contains(file.Bytes(), []byte("string email")) {
		t.Fatal("the scoped export holds data of a type outside the scope")
	}
	_, err = c.Export(t.Context(), nil, &bytes.Buffer{}, client.ExportBinary)
	wantCode(t, err, codes.Unauthenticated)
}

// An export while a writer runs reads every type at one snapshot: each
// write batch holds user i and order i, so any export holds as many users
// as orders, ids 1..k without a gap, although the types are read one
// after the other.
func TestExportOneSnapshot(t *testing.T) {
	_, c := startExportServer(t, server.Config{MaxResultRecords: 64})
	fillExportServer(t, c, 0, 0)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, err := c.NewWriter(ctx, client.Insert, client.WriterOptions{BatchRecords: 2})
	if err != nil {
		t.Fatal(err)
	}
	written := make(chan error, 1)
	go func() {
		var err error
		for i := int64(1); err == nil && ctx.Err() == nil; i++ {
			if err = w.WriteAny(user(i, fmt.Sprintf("u%d@x", i))); err == nil {
				err = w.WriteAny(order(i, 1))
			}
		}
		written <- err
	}()
	types, err := c.Types(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 5; round++ {
		var file bytes.Buffer
		if _, err := c.Export(t.Context(), nil, &file, client.ExportBinary); err != nil {
			t.Fatal(err)
		}
		rd, err := export.NewReader(&file, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string][]int64{}
		for {
			a, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			m, err := types.Message(a)
			if err != nil {
				t.Fatal(err)
			}
			id := m.Get(m.Descriptor().Fields().ByName("id")).Int()
			name := string(m.Descriptor().FullName())
			ids[name] = append(ids[name], id)
		}
		users, orders := ids["shop.User"], ids["sales.Order"]
		if len(users) != len(orders) {
			t.Fatalf("round %d: %d users but %d orders: not one snapshot", round, len(users), len(orders))
		}
		for i, id := range users {
			if id != int64(i+1) || orders[i] != id {
				t.Fatalf("round %d: record %d has ids %d and %d", round, i, id, orders[i])
			}
		}
		t.Logf("round %d: %d of each", round, len(users))
	}
	cancel()
	<-written
}

// recordID names a record of the export tests' types by its type and id
// (field 1 of both): the JSON format re-encodes records, and need not
// write their fields in the order the server stored them.
func recordID(t *testing.T, a *anypb.Any) string {
	t.Helper()
	b := a.GetValue()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(b)
			return fmt.Sprintf("%s/%d", a.GetTypeUrl(), v)
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			break
		}
		b = b[n:]
	}
	t.Fatalf("record %x has no id", a.GetValue())
	return ""
}

// scanVersions returns each record's version by recordID, read by a Scan
// that asks for versions.
func scanVersions(t *testing.T, c *client.Client, types ...string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, typ := range types {
		s := c.Scan(t.Context(), &pb.Query{Type: typ, Versions: true}, client.ScanOptions{})
		for s.Next() {
			out[recordID(t, s.Record())] = s.Version()
		}
		if err := s.Err(); err != nil {
			t.Fatalf("scan %s: %v", typ, err)
		}
	}
	return out
}

// fileVersions reads an export file and returns each record's version by
// recordID.
func fileVersions(t *testing.T, b []byte) map[string]uint64 {
	t.Helper()
	r, err := export.NewReader(bytes.NewReader(b), func(s *pb.ExportSchema) (export.Codec, error) {
		resp := &pb.GetSchemaResponse{Files: s.GetFiles(), Version: s.GetVersion(), Descriptors: s.GetDescriptors()}
		for _, typ := range s.GetTypes() {
			resp.Types = append(resp.Types, &pb.RecordType{Name: typ})
		}
		return client.NewTypes(resp)
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for {
		a, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[recordID(t, a)] = r.Version()
	}
}

// An export that asks for versions holds each record's version as the
// server reads it, in both formats; one that does not holds none. An
// import of it writes the records anew, at new versions.
func TestExportVersions(t *testing.T) {
	_, src := startExportServer(t, server.Config{MaxResultRecords: 100})
	fillExportServer(t, src, 250, 30)
	// A second batch, so that the records do not all share one version.
	w, err := src.NewWriter(t.Context(), client.Upsert, client.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := w.WriteAny(order(int64(i+1), 99)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := scanVersions(t, src, "sales.Order", "shop.User")
	distinct := map[uint64]bool{}
	for _, v := range want {
		distinct[v] = true
	}
	if len(want) != 280 || len(distinct) < 2 || distinct[0] {
		t.Fatalf("%d records at versions %v", len(want), distinct)
	}
	for _, format := range []client.ExportFormat{client.ExportBinary, client.ExportJSON} {
		t.Run(format.String(), func(t *testing.T) {
			var file bytes.Buffer
			if n, err := src.ExportVersioned(t.Context(), nil, &file, format); err != nil || n != 280 {
				t.Fatalf("export: %d records, %v", n, err)
			}
			got := fileVersions(t, file.Bytes())
			if len(got) != len(want) {
				t.Fatalf("%d records in the file, want %d", len(got), len(want))
			}
			for k, v := range want {
				if got[k] != v {
					t.Fatalf("record %s at version %d in the file, %d in the store", k, got[k], v)
				}
			}
			var plain bytes.Buffer
			if _, err := src.Export(t.Context(), nil, &plain, format); err != nil {
				t.Fatal(err)
			}
			for _, v := range fileVersions(t, plain.Bytes()) {
				if v != 0 {
					t.Fatalf("an export without versions holds version %d", v)
				}
			}
			// Into the same server: every record is written again, at a
			// version above the one the file holds.
			if _, err := src.Import(t.Context(), bytes.NewReader(file.Bytes()), client.ImportOptions{}); err != nil {
				t.Fatal(err)
			}
			for k, v := range scanVersions(t, src, "sales.Order", "shop.User") {
				if v <= want[k] {
					t.Fatalf("after the import a record is at version %d, the file says %d", v, want[k])
				}
			}
			want = scanVersions(t, src, "sales.Order", "shop.User")
		})
	}
}
