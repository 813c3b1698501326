package apierror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func TestConstructors(t *testing.T) {
	cause := errors.New("bad byte")
	for _, tc := range []struct {
		name  string
		err   *Error
		code  Code
		msg   string
		cause error
	}{
		{"New", New(Unavailable, "stopping"), Unavailable, "stopping", nil},
		{"Errorf", Errorf(NotFound, "no %s record", "shop.User"), NotFound, "no shop.User record", nil},
		{"Errorf %w", Errorf(InvalidArgument, "decode: %w", cause), InvalidArgument, "decode: bad byte", cause},
		{"Wrap", Wrap(ResourceExhausted, cause), ResourceExhausted, "bad byte", cause},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err.Code != tc.code || tc.err.Error() != tc.msg || tc.err.Write != nil {
				t.Errorf("got %v %q %v", tc.err.Code, tc.err.Error(), tc.err.Write)
			}
			if !errors.Is(errors.Unwrap(tc.err), tc.cause) {
				t.Errorf("cause %v, want %v", errors.Unwrap(tc.err), tc.cause)
			}
		})
	}
}

func TestFrom(t *testing.T) {
	own := New(NotFound, "gone")
	for _, tc := range []struct {
		name string
		err  error
		code Code
		msg  string
	}{
		{"own", fmt.Errorf("get: %w", own), NotFound, "gone"},
		{"canceled", fmt.Errorf("read: %w", context.Canceled), Canceled, "read: context canceled"},
		{"deadline", context.DeadlineExceeded, DeadlineExceeded, "context deadline exceeded"},
		{"plain", io.ErrUnexpectedEOF, Internal, "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := From(tc.err)
			if e.Code != tc.code || e.Error() != tc.msg || CodeOf(tc.err) != tc.code {
				t.Errorf("From = %v %q, want %v %q", e.Code, e.Error(), tc.code, tc.msg)
			}
			if !errors.Is(e, tc.err) && e != own {
				t.Errorf("From(%v) lost its cause", tc.err)
			}
		})
	}
	if From(nil) != nil || CodeOf(nil) != OK {
		t.Error("From(nil) is not nil, or CodeOf(nil) is not OK")
	}
}

func TestCodeString(t *testing.T) {
	for c, want := range map[Code]string{OK: "OK", InvalidArgument: "InvalidArgument", Unauthenticated: "Unauthenticated", 99: "Code(99)"} {
		if c.String() != want {
			t.Errorf("%d.String() = %q, want %q", uint32(c), c.String(), want)
		}
	}
}

// A write error names its record, or the condition that failed, in front
// of the reason.
func TestWriteErrorMessage(t *testing.T) {
	cond := uint32(2)
	for _, tc := range []struct {
		w    *pb.WriteError
		want string
	}{
		{&pb.WriteError{Batch: 1, Record: 3, TypeUrl: "u", Field: "email"}, "batch 1, record 3 (u), field email: why"},
		{&pb.WriteError{Batch: 1, Record: 3, Condition: &cond, TypeUrl: "u"}, "batch 1, condition 2 (u): why"},
		{&pb.WriteError{Batch: 0, Condition: &cond, Field: "filter"}, "batch 0, condition 2, field filter: why"},
	} {
		if got := (&Error{Code: Aborted, Msg: "why", Write: tc.w}).Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
