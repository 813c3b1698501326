// Package apierror owns Protobase's error vocabulary: the typed error every
// layer returns (a gRPC code and the details that name what failed), and its
// one mapping to a gRPC status and to an HTTP status. The engine builds
// these errors; every transport (gRPC, REST, NATS, the lab) turns them into
// its own form through Status and HTTPStatus, so a failure reads the same on
// each of them.
//
// It is a leaf: it imports only gRPC's codes and status, protobuf and the
// public API's messages, so transports and codecs can use it without
// pulling in the engine or storage.
package apierror

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Error is a failure with a status code and the details that name what
// failed. Code is never codes.OK. When Write is set it is the first detail
// of the status, so a client always finds the failed batch, record and
// field, and the counts applied before it, in the same place.
type Error struct {
	Code codes.Code
	// Msg is the human-readable reason.
	Msg string
	// Write, when set, names the batch, record and field of a failed write
	// and the batches and records applied before it.
	Write *pb.WriteError
	// Field is the field path to blame in a failed query, if any.
	Field string
	// Details are extra status details (for example google.rpc.BadRequest).
	Details []protoadapt.MessageV1
	// Err is the wrapped cause, if any.
	Err error
}

// Error renders the message with the batch, record, type and field of a
// failed write in front, as the status message carries it.
func (e *Error) Error() string {
	if w := e.Write; w != nil {
		s := fmt.Sprintf("batch %d, record %d", w.Batch, w.Record)
		if w.TypeUrl != "" {
			s += " (" + w.TypeUrl + ")"
		}
		if w.Field != "" {
			s += ", field " + w.Field
		}
		return s + ": " + e.Msg
	}
	return e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns an error with code and message.
func New(code codes.Code, msg string) *Error { return &Error{Code: code, Msg: msg} }

// Errorf returns an error with code and a formatted message; a %w verb
// makes its operand the cause (Unwrap); with several, there is none.
func Errorf(code codes.Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// Wrap returns an error with code whose message is err's and whose cause
// is err.
func Wrap(code codes.Code, err error) *Error {
	return &Error{Code: code, Msg: err.Error(), Err: err}
}

// Record returns the error of record i of a write batch: the WriteError
// names the record, its type URL and the field to blame. The writer that
// applies the batch fills in the batch ordinal and the applied counts.
func Record(code codes.Code, i int, typeURL, field, reason string) *Error {
	return &Error{
		Code: code,
		Msg:  reason,
		Write: &pb.WriteError{
			Record:  uint64(i),
			TypeUrl: typeURL,
			Field:   field,
			Reason:  reason,
		},
	}
}

// Status converts any error into a gRPC status with details: an *Error
// keeps its code and carries its WriteError (first) and Details; context
// errors keep their meaning; an error that already carries a status keeps
// it; anything else is INTERNAL. A nil error is OK.
func Status(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	var e *Error
	switch {
	case errors.As(err, &e):
		st := status.New(e.Code, e.Error())
		details := e.Details
		if e.Write != nil {
			details = append([]protoadapt.MessageV1{e.Write}, details...)
		}
		if len(details) > 0 {
			if d, derr := st.WithDetails(details...); derr == nil {
				return d
			}
		}
		return st
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, err.Error())
	}
	if s, ok := status.FromError(err); ok {
		return s
	}
	return status.New(codes.Internal, err.Error())
}

// HTTPStatus is the HTTP status code that stands for a gRPC code on the
// REST gateway and in NATS error headers. It is grpc-gateway's mapping
// (499 for a cancelled call; FAILED_PRECONDITION is 400, not 412), so REST
// clients see what grpc-gateway users expect; an unknown code is 500.
func HTTPStatus(code codes.Code) int {
	switch code {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499 // client closed request (nginx's code; net/http has none)
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError // Unknown, Internal, DataLoss, others
}
