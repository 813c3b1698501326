package engine

import (
	"google.golang.org/grpc/codes"

	"github.com/protobase/protobase/internal/apierror"
)

// The engine's errors are *apierror.Error, whose vocabulary lives in
// internal/apierror so that transports and codecs share it without
// depending on the engine.

// recordError builds the error of record i of the current batch; the writer
// fills in the batch ordinal and applied counts.
func recordError(code codes.Code, i int, typeURL, field, reason string) *apierror.Error {
	return apierror.Record(code, i, typeURL, field, reason)
}

// ErrClosed is returned by calls on a closed engine.
var ErrClosed = apierror.New(codes.Unavailable, "engine is closed")
