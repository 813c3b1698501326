package apistatus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
)

// TestCodesAreGRPCs checks that every code of the vocabulary is gRPC's,
// number and name, which is what Status relies on.
func TestCodesAreGRPCs(t *testing.T) {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if got := apierror.Code(c).String(); got != c.String() {
			t.Errorf("code %d is %q, gRPC's is %q", uint32(c), got, c.String())
		}
	}
}

// TestCodeMappings maps every gRPC code through an *Error to its status
// code and HTTP status.
func TestCodeMappings(t *testing.T) {
	for _, tc := range []struct {
		code codes.Code
		http int
	}{
		{codes.OK, http.StatusOK},
		{codes.Canceled, 499},
		{codes.Unknown, http.StatusInternalServerError},
		{codes.InvalidArgument, http.StatusBadRequest},
		{codes.DeadlineExceeded, http.StatusGatewayTimeout},
		{codes.NotFound, http.StatusNotFound},
		{codes.AlreadyExists, http.StatusConflict},
		{codes.PermissionDenied, http.StatusForbidden},
		{codes.ResourceExhausted, http.StatusTooManyRequests},
		{codes.FailedPrecondition, http.StatusBadRequest},
		{codes.Aborted, http.StatusConflict},
		{codes.OutOfRange, http.StatusBadRequest},
		{codes.Unimplemented, http.StatusNotImplemented},
		{codes.Internal, http.StatusInternalServerError},
		{codes.Unavailable, http.StatusServiceUnavailable},
		{codes.DataLoss, http.StatusInternalServerError},
		{codes.Unauthenticated, http.StatusUnauthorized},
		{codes.Code(99), http.StatusInternalServerError},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			if got := HTTPStatus(tc.code); got != tc.http {
				t.Errorf("HTTPStatus(%v) = %d, want %d", tc.code, got, tc.http)
			}
			// REST clients were served grpc-gateway's mapping before;
			// it must not drift from it.
			if want := runtime.HTTPStatusFromCode(tc.code); HTTPStatus(tc.code) != want {
				t.Errorf("HTTPStatus(%v) = %d, grpc-gateway says %d", tc.code, HTTPStatus(tc.code), want)
			}
			if tc.code == codes.OK {
				return
			}
			st := Status(fmt.Errorf("context: %w", apierror.New(apierror.Code(tc.code), "reason")))
			if st.Code() != tc.code || st.Message() != "reason" {
				t.Errorf("Status = %v %q, want %v %q", st.Code(), st.Message(), tc.code, "reason")
			}
		})
	}
}

// TestStatusOfOtherErrors covers the errors that are not *Error.
func TestStatusOfOtherErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code codes.Code
		msg  string
	}{
		{"nil", nil, codes.OK, ""},
		{"canceled", fmt.Errorf("read: %w", context.Canceled), codes.Canceled, "read: context canceled"},
		{"deadline", context.DeadlineExceeded, codes.DeadlineExceeded, "context deadline exceeded"},
		{"status", status.Error(codes.NotFound, "gone"), codes.NotFound, "gone"},
		{"plain", io.ErrUnexpectedEOF, codes.Internal, "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Status(tc.err)
			if st.Code() != tc.code || st.Message() != tc.msg {
				t.Errorf("Status = %v %q, want %v %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
		})
	}
}

// TestStatusDetails checks that a write error's details, applied counts
// included, reach the status first and unchanged, before the extra details.
func TestStatusDetails(t *testing.T) {
	e := apierror.Record(apierror.AlreadyExists, 3, "type.googleapis.com/shop.User", "id", "a record with this primary key exists")
	e.Write.Batch, e.Write.BatchesApplied, e.Write.RecordsApplied = 2, 2, 17
	br := &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "id", Description: "taken"}}}
	e.Details = []protoadapt.MessageV1{br}

	st := Status(fmt.Errorf("insert: %w", e))
	if st.Code() != codes.AlreadyExists {
		t.Fatalf("code %v", st.Code())
	}
	wantMsg := "batch 2, record 3 (type.googleapis.com/shop.User), field id: a record with this primary key exists"
	if st.Message() != wantMsg {
		t.Errorf("message %q, want %q", st.Message(), wantMsg)
	}
	details := st.Details()
	if len(details) != 2 {
		t.Fatalf("%d details, want 2: %v", len(details), details)
	}
	we, ok := details[0].(*pb.WriteError)
	if !ok {
		t.Fatalf("first detail is %T, want *pb.WriteError", details[0])
	}
	want := &pb.WriteError{Batch: 2, Record: 3, TypeUrl: "type.googleapis.com/shop.User", Field: "id",
		Reason: "a record with this primary key exists", BatchesApplied: 2, RecordsApplied: 17}
	if !proto.Equal(we, want) {
		t.Errorf("WriteError %v, want %v", we, want)
	}
	if got, ok := details[1].(*errdetails.BadRequest); !ok || !proto.Equal(got, br) {
		t.Errorf("second detail %v, want %v", details[1], br)
	}
	// The status survives the wire form a transport sends.
	back := status.FromProto(st.Proto())
	if we2, ok := back.Details()[0].(*pb.WriteError); !ok || we2.RecordsApplied != 17 || we2.BatchesApplied != 2 {
		t.Errorf("after round trip: %v", back.Details())
	}
}

// TestError brings a gRPC status error back into the vocabulary.
func TestError(t *testing.T) {
	br := &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "id"}}}
	st, err := status.New(codes.ResourceExhausted, "too large").WithDetails(br)
	if err != nil {
		t.Fatal(err)
	}
	var e *apierror.Error
	if !errors.As(Error(st.Err()), &e) {
		t.Fatalf("Error(%v) is not an *apierror.Error", st.Err())
	}
	if e.Code != apierror.ResourceExhausted || e.Msg != "too large" || len(e.Details) != 1 || !proto.Equal(protoadapt.MessageV2Of(e.Details[0]), br) {
		t.Errorf("got %v %q %v", e.Code, e.Msg, e.Details)
	}
	own := apierror.New(apierror.NotFound, "gone")
	if e2 := Error(own); !errors.Is(e2, own) || Error(nil) != nil {
		t.Error("Error changed an *apierror.Error or a nil error")
	}
	if got := apierror.CodeOf(Error(io.EOF)); got != apierror.Internal {
		t.Errorf("plain error: %v", got)
	}
}
