package server_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
)

// A start past the last commit is OUT_OF_RANGE leading with the newest
// position, the way out, and naming the oldest too; the Position detail
// is the oldest.
func TestWatchPastTheEndNamesTheRange(t *testing.T) {
	ts := startServer(t, server.Config{NoSync: true})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	var last uint64
	for i := 1; i <= 6; i++ {
		resp := ts.MustWrite(pb.WriteOp_WRITE_OP_INSERT, []*anypb.Any{ts.Rec("shop.User", fmt.Sprintf(`{"id": %d, "email": "%d@x"}`, i, i))})
		last = resp.GetPosition()
	}
	first := last - 5
	st := ts.watchErr(&pb.WatchRequest{Types: []string{"shop.User"}, Start: after(last + 1000)})
	want := fmt.Sprintf("is past the newest commit %d: it is not from this database's history (a restored backup, or another server); start after commit %d (the newest position) or an earlier one still kept, or at now; the oldest position available is commit %d", last, last, first-1)
	if st.Code() != codes.OutOfRange || !strings.Contains(st.Message(), want) {
		t.Fatalf("start past the last commit: %v, want OUT_OF_RANGE with %q", st, want)
	}
	var named *pb.Position
	for _, d := range st.Details() {
		if p, ok := d.(*pb.Position); ok {
			named = p
		}
	}
	if named.GetCommit() != first-1 {
		t.Fatalf("Position detail %v, want the oldest, commit %d", named, first-1)
	}
}
