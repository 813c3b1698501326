package engine

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/store"
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

// storeError gives the storage contract's errors their API codes: a
// batch over the store's limits, or refused for a full disk, is
// RESOURCE_EXHAUSTED, a read at a
// version the store has compacted away FAILED_PRECONDITION, and a batch
// that kept losing its preconditions to other writers ABORTED. Each keeps
// the store's message, which says what to do. Other errors pass as they
// are.
func storeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrLimit), errors.Is(err, store.ErrDiskFull):
		return &apierror.Error{Code: codes.ResourceExhausted, Msg: err.Error(), Err: err}
	case errors.Is(err, store.ErrCompacted):
		return &apierror.Error{Code: codes.FailedPrecondition, Msg: err.Error() + "; run the query again", Err: err}
	case errors.Is(err, store.ErrConflict):
		return &apierror.Error{Code: codes.Aborted, Msg: err.Error() + "; retry the batch", Err: err}
	}
	return err
}
