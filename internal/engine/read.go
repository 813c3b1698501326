package engine

import (
	"context"

	"google.golang.org/grpc/codes"
)

// ForEach calls fn with the bytes of every record of a type, in primary-key
// order, on one storage snapshot taken at the call. fn must not keep val
// after it returns; returning false stops the scan.
func (e *Engine) ForEach(ctx context.Context, typeName string, fn func(val []byte) bool) error {
	if e.closed.Load() {
		return ErrClosed
	}
	t := e.cat.Load().lookup(typeName)
	if t == nil {
		return errorf(codes.NotFound, "no record type %q in the schema", typeName)
	}
	snap := e.st.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIter(t.prefix, prefixEnd(t.prefix))
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			it.Close()
			return err
		}
		if !fn(it.Value()) {
			break
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	return it.Close()
}
