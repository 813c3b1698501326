// Package apierror owns Protobase's error vocabulary: the typed error every
// layer returns (a Code and the details that name what failed). The engine
// builds these errors; every transport (gRPC, REST, NATS, the lab) turns
// them into its own form through internal/apistatus, the one mapping of
// the vocabulary to gRPC and HTTP statuses, so a failure reads the same on
// each of them.
//
// It is a leaf that knows nothing of gRPC: it imports only protobuf and
// the public API's messages, so that the engine, and the codecs, use it
// without linking a transport. Its codes are gRPC's in number and meaning
// (google.rpc.Code), which is what lets apistatus map them one to one.
package apierror

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/protoadapt"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Error is a failure with a status code and the details that name what
// failed. Code is never OK. When Write is set it is the first detail
// of the status, so a client always finds the failed batch, record and
// field, and the counts applied before it, in the same place.
type Error struct {
	Code Code
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

// Error renders the message with the batch, record (or condition), type
// and field of a failed write in front, as the status message carries it.
func (e *Error) Error() string {
	if w := e.Write; w != nil {
		s := fmt.Sprintf("batch %d, record %d", w.Batch, w.Record)
		if w.Condition != nil {
			s = fmt.Sprintf("batch %d, condition %d", w.Batch, *w.Condition)
		}
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
func New(code Code, msg string) *Error { return &Error{Code: code, Msg: msg} }

// Errorf returns an error with code and a formatted message; a %w verb
// makes its operand the cause (Unwrap); with several, there is none.
func Errorf(code Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// Wrap returns an error with code whose message is err's and whose cause
// is err.
func Wrap(code Code, err error) *Error {
	return &Error{Code: code, Msg: err.Error(), Err: err}
}

// Record returns the error of record i of a write batch: the WriteError
// names the record, its type URL and the field to blame. The writer that
// applies the batch fills in the batch ordinal and the applied counts.
func Record(code Code, i int, typeURL, field, reason string) *Error {
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

// From returns err as an *Error: an *Error it wraps as it is; a context
// error with the code that keeps its meaning (CANCELLED, DEADLINE_EXCEEDED);
// anything else as INTERNAL with err's message. A transport converts the
// errors of its own kind (a gRPC status) with apistatus.Error before they
// reach the engine. A nil error is nil.
func From(err error) *Error {
	var e *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return e
	case errors.Is(err, context.Canceled):
		return &Error{Code: Canceled, Msg: err.Error(), Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: DeadlineExceeded, Msg: err.Error(), Err: err}
	}
	return &Error{Code: Internal, Msg: err.Error(), Err: err}
}

// CodeOf is the code of err as From gives it; OK for a nil error.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	return From(err).Code
}
