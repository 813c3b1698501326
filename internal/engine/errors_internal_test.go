package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/apistatus"
	"github.com/protobase/protobase/internal/store"
)

// The storage contract's errors reach clients with their own codes and
// the store's advice, through every transport's apierror.Status.
func TestStoreErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code apierror.Code
		says string
	}{
		{fmt.Errorf("%w: raise --max-txn-ops", store.ErrLimit), apierror.ResourceExhausted, "--max-txn-ops"},
		{fmt.Errorf("get: %w", store.ErrCompacted), apierror.FailedPrecondition, "run the query again"},
		{store.ErrConflict, apierror.Aborted, "retry the batch"},
		{errors.New("disk on fire"), apierror.Internal, "disk on fire"},
	} {
		st := apistatus.Status(storeError(tc.err))
		if apierror.Code(st.Code()) != tc.code || !strings.Contains(st.Message(), tc.says) {
			t.Errorf("%v: %v %q; want %v saying %q", tc.err, st.Code(), st.Message(), tc.code, tc.says)
		}
	}
	if storeError(nil) != nil {
		t.Error("storeError(nil) is not nil")
	}
}
