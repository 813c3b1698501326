package engine

import (
	"errors"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/store"
)

// The engine's errors are *apierror.Error, whose vocabulary lives in
// internal/apierror so that transports and codecs share it without
// depending on the engine.

// recordError builds the error of record i of the current batch; the writer
// fills in the batch ordinal and applied counts.
func recordError(code apierror.Code, i int, typeURL, field, reason string) *apierror.Error {
	return apierror.Record(code, i, typeURL, field, reason)
}

// ErrClosed is returned by calls on a closed engine.
var ErrClosed = apierror.New(apierror.Unavailable, "engine is closed")

// storeError gives the storage contract's errors their API codes: a
// batch over the store's limits, or refused for a full disk, is
// RESOURCE_EXHAUSTED, a read at a version the store has compacted away
// FAILED_PRECONDITION, a batch that kept losing its preconditions to other
// writers ABORTED, a store that could not be reached UNAVAILABLE (nothing
// was applied: a retry is safe), and a batch sent to the store without an
// answer DEADLINE_EXCEEDED, whose message says that it may have been
// applied. Each keeps the store's message, which says what happened.
// Other errors pass as they are.
func storeError(err error) error {
	if e := storeCode(err); e != nil {
		return e
	}
	return err
}

// StoreError is storeError for the packages above the engine that read
// the store through it (internal/watch): one mapping of the storage
// contract's errors onto the API's codes.
func StoreError(err error) error { return storeError(err) }

// storeCode is storeError's mapping; nil for an error the storage
// contract does not name.
func storeCode(err error) *apierror.Error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrLimit), errors.Is(err, store.ErrDiskFull):
		return &apierror.Error{Code: apierror.ResourceExhausted, Msg: err.Error(), Err: err}
	case errors.Is(err, store.ErrCompacted):
		return &apierror.Error{Code: apierror.FailedPrecondition, Msg: err.Error() + "; run the query again", Err: err}
	case errors.Is(err, store.ErrConflict):
		return &apierror.Error{Code: apierror.Aborted, Msg: err.Error() + "; retry the batch", Err: err}
	case errors.Is(err, store.ErrUnavailable):
		return &apierror.Error{Code: apierror.Unavailable, Msg: err.Error() + "; nothing was applied: retry once the store answers", Err: err}
	case errors.Is(err, store.ErrOutcomeUnknown):
		// DEADLINE_EXCEEDED is the code gRPC defines as "may have
		// completed"; UNAVAILABLE stays the code of a request that
		// certainly changed nothing.
		return &apierror.Error{Code: apierror.DeadlineExceeded, Err: err,
			Msg: err.Error() + "; the batch may have been applied: read it back before retrying"}
	}
	return nil
}

// readError is the error of a failed read of stored data: the storage
// contract's code (a store that is unreachable is UNAVAILABLE), else
// INTERNAL naming what was read.
func readError(what string, err error) *apierror.Error {
	if e := storeCode(err); e != nil {
		return e
	}
	return &apierror.Error{Code: apierror.Internal, Msg: what + ": " + err.Error(), Err: err}
}
