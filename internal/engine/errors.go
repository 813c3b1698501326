package engine

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Error is the engine's typed error: a status code and the details that name
// what failed. Every transport turns errors into its own form through Status,
// the one place where errors map to codes.
type Error struct {
	Code codes.Code
	// Msg is the human-readable reason.
	Msg string
	// Write, when set, names the batch, record and field of a failed write.
	Write *pb.WriteError
	// Field is the field path to blame in a failed query, if any.
	Field string
	// Details are extra status details (for example google.rpc.BadRequest).
	Details []protoadapt.MessageV1
	// Err is the wrapped cause, if any.
	Err error
}

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

func (e *Error) Unwrap() error { return e.Err }

// recordError builds the error of record i of the current batch; the writer
// fills in the batch ordinal and applied counts.
func recordError(code codes.Code, i int, typeURL, field, reason string) *Error {
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

// ErrClosed is returned by calls on a closed engine.
var ErrClosed = &Error{Code: codes.Unavailable, Msg: "engine is closed"}

// Status converts any error returned by the engine into a gRPC status with
// details. Context errors keep their meaning; unknown errors are INTERNAL.
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
