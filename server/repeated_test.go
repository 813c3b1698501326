package server_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

const postProto = `syntax = "proto3";
package blog;
import "protobase/v1/options.proto";
message Post {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "tags" }
    index: { name: "slugs" fields: "slugs" unique: true }
  };
  int64 id = 1;
  repeated string tags = 2;
  repeated string slugs = 3;
}
`

// TestRepeatedIndexServer: over gRPC, a query on a repeated field reads
// its index (explain names it) and returns each record once; a unique
// index on a repeated field refuses a shared element with ALREADY_EXISTS
// and a WriteError naming the field and the element; a record past the
// entry limit is INVALID_ARGUMENT naming the field.
func TestRepeatedIndexServer(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"post.proto": postProto})
	ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{
		ts.Rec("blog.Post", `{"id": 1, "tags": ["go", "db", "go"], "slugs": ["one"]}`),
		ts.Rec("blog.Post", `{"id": 2, "tags": ["rust"], "slugs": ["two", "deux"]}`),
		ts.Rec("blog.Post", `{"id": 3}`),
	})
	page, err := ts.C.Query(t.Context(), &pb.Query{Type: "blog.Post", Filter: `tags in ("go", "db", "rust")`, Explain: true}, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if page.Plan.GetIndex() != "tags" || len(page.Records) != 2 {
		t.Fatalf("tags in (go, db, rust): %d records by %s, want 2 by index tags", len(page.Records), page.Plan.GetText())
	}
	_, err = ts.Write(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("blog.Post", `{"id": 4, "slugs": ["four", "deux"]}`)})
	st := status.Convert(err)
	if st.Code() != codes.AlreadyExists {
		t.Fatalf("a shared slug: %v", err)
	}
	we := writeDetail(t, st.Proto())
	if we.Field != "slugs" || !strings.Contains(we.Reason, `already holds the element "deux" for another record`) {
		t.Fatalf("WriteError field %q reason %q", we.Field, we.Reason)
	}
	tags := make([]string, 1001)
	for i := range tags {
		tags[i] = `"t` + itoa(i) + `"`
	}
	_, err = ts.Write(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("blog.Post", `{"id": 5, "tags": [`+strings.Join(tags, ",")+`]}`)})
	st = status.Convert(err)
	if we := writeDetail(t, st.Proto()); st.Code() != codes.InvalidArgument || we.Field != "tags" ||
		!strings.Contains(we.Reason, "1001 distinct elements, more than the limit of 1000 entries per record in index tags") {
		t.Fatalf("1,001 tags: %v", err)
	}
}
