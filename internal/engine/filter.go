package engine

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/textfilter"
)

// withFilter returns q with its text filter parsed into where, or q itself
// when it has none. The result is a copy (q may be a caller's message, or
// a slab the gRPC codec reuses), so the compiled query, and the page token
// hashed from it, read the same whether the filter came as text or as a
// tree.
func withFilter(q *pb.Query) (*pb.Query, error) {
	text := q.GetFilter()
	if text == "" {
		return q, nil
	}
	if q.GetWhere() != nil {
		return nil, filterError("query has both filter and where: set one of them", nil)
	}
	expr, err := textfilter.Parse(text)
	if err != nil {
		return nil, filterError("filter: "+err.Error(), err)
	}
	return parsedCopy(q, expr), nil
}

// parsedCopy is q with where in place of its filter: its scalars copied,
// its sub-messages cloned (q's may be reused), written out field by field
// because proto.Clone's reflection took a third of a one-comparison
// filter's parse (TestParsedCopy holds it to every field of Query).
func parsedCopy(q *pb.Query, where *pb.Expr) *pb.Query {
	nq := &pb.Query{
		Type: q.GetType(), Where: where, Limit: q.GetLimit(), KeysOnly: q.GetKeysOnly(),
		Explain: q.GetExplain(), Count: q.GetCount(), Versions: q.GetVersions(),
	}
	if o := q.GetOrder(); o != nil {
		nq.Order = proto.CloneOf(o)
	}
	if a := q.GetAggregate(); a != nil {
		nq.Aggregate = proto.CloneOf(a)
	}
	if u := q.ProtoReflect().GetUnknown(); len(u) > 0 {
		nq.ProtoReflect().SetUnknown(append(protoreflect.RawFields(nil), u...))
	}
	return nq
}

// pointProbe returns, for a Search query with a text filter, what
// query.Point.Key reads of it with the text parsed into where, or nil
// when the text cannot be a key equality (it has no "="), sits beside a
// where, or does not parse: the planner then parses it again and reports
// what is wrong. Only Key reads the probe; the lookup runs q itself, whose
// limit, keys_only and count the probe leaves out.
func pointProbe(q *pb.Query) *pb.Query {
	text := q.GetFilter()
	if q.GetWhere() != nil || !strings.Contains(text, "=") {
		return nil
	}
	expr, err := textfilter.Parse(text)
	if err != nil {
		return nil
	}
	return &pb.Query{Type: q.GetType(), Where: expr, Explain: q.GetExplain(), Order: q.GetOrder()}
}

// inFilter is the message of a query the planner refused: when the query
// came as the text filter text and the error names a field, it points at
// the column where the text compares that field.
func inFilter(text string, qe *query.Error) string {
	if text == "" || qe.Field == "" {
		return qe.Error()
	}
	if col := textfilter.FieldColumn(text, qe.Field); col > 0 {
		return fmt.Sprintf("filter: column %d: %s", col, qe.Error())
	}
	return "filter: " + qe.Error()
}

// filterError is the INVALID_ARGUMENT of a bad filter field, with a
// google.rpc.BadRequest naming it, so clients that read field violations
// (grpc-gateway's and the Python client's users) find the field and, in
// the description, the column.
func filterError(msg string, cause error) *apierror.Error {
	var se *textfilter.SyntaxError
	desc := msg
	if errors.As(cause, &se) {
		desc = se.Error()
	}
	return &apierror.Error{Code: apierror.InvalidArgument, Msg: msg, Details: filterViolation(desc), Err: cause}
}

// filterViolation is the status detail naming the filter field.
func filterViolation(desc string) []protoadapt.MessageV1 {
	return []protoadapt.MessageV1{&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
		{Field: "query.filter", Description: desc},
	}}}
}
