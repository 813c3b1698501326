package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/store"
)

// The storage contract's errors reach clients with their own codes and
// the store's advice, through every transport's apierror.Status.
func TestStoreErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
		says string
	}{
		{fmt.Errorf("%w: raise --max-txn-ops", store.ErrLimit), codes.ResourceExhausted, "--max-txn-ops"},
		{fmt.Errorf("get: %w", store.ErrCompacted), codes.FailedPrecondition, "run the query again"},
		{store.ErrConflict, codes.Aborted, "retry the batch"},
		{errors.New("disk on fire"), codes.Internal, "disk on fire"},
	} {
		st := apierror.Status(storeError(tc.err))
		if st.Code() != tc.code || !strings.Contains(st.Message(), tc.says) {
			t.Errorf("%v: %v %q; want %v saying %q", tc.err, st.Code(), st.Message(), tc.code, tc.says)
		}
	}
	if storeError(nil) != nil {
		t.Error("storeError(nil) is not nil")
	}
}
