package engine

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/protobase/protobase/internal/apierror"
)

// Error is the engine's typed error; the vocabulary lives in
// internal/apierror so that transports and codecs share it without
// depending on the engine.
type Error = apierror.Error

// recordError builds the error of record i of the current batch; the writer
// fills in the batch ordinal and applied counts.
func recordError(code codes.Code, i int, typeURL, field, reason string) *Error {
	return apierror.Record(code, i, typeURL, field, reason)
}

// ErrClosed is returned by calls on a closed engine.
var ErrClosed = apierror.New(codes.Unavailable, "engine is closed")

// Status is apierror.Status, kept for the engine's own callers (Writer.Abort);
// transports call apierror.Status directly.
func Status(err error) *status.Status { return apierror.Status(err) }
