// Package apistatus owns the one mapping of Protobase's error vocabulary
// (internal/apierror) onto the statuses the transports send: a gRPC status
// with its details (Status) and an HTTP status code for the REST gateway
// and NATS error headers (HTTPStatus). It also brings a gRPC status error
// that a transport received back into the vocabulary (Error), before it
// reaches the engine, which knows nothing of gRPC.
package apistatus

import (
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/protobase/protobase/internal/apierror"
)

// Status converts any error into a gRPC status with details: an
// *apierror.Error keeps its code and carries its WriteError (first) and
// Details; context errors keep their meaning; an error that already
// carries a status keeps it; anything else is INTERNAL. A nil error is OK.
func Status(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	var e *apierror.Error
	if !errors.As(err, &e) {
		if s, ok := status.FromError(err); ok {
			return s
		}
		e = apierror.From(err)
	}
	st := status.New(codes.Code(e.Code), e.Error())
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
}

// Error returns err in the vocabulary: an *apierror.Error as it is; a gRPC
// status error (what a gRPC stream's Recv returns) as an *apierror.Error
// with the status's code, message and details; anything else as apierror.From gives it.
func Error(err error) error {
	if err == nil {
		return nil
	}
	var e *apierror.Error
	if errors.As(err, &e) {
		return err
	}
	s, ok := status.FromError(err)
	if !ok {
		return apierror.From(err)
	}
	out := &apierror.Error{Code: apierror.Code(s.Code()), Msg: s.Message(), Err: err}
	for _, d := range s.Details() {
		if m, ok := d.(protoadapt.MessageV1); ok {
			out.Details = append(out.Details, m)
		}
	}
	return out
}

// HTTPStatus is the HTTP status code that stands for a status code (an
// apierror.Code, number for number) on the REST
// gateway and in NATS error headers. It is grpc-gateway's mapping (499 for
// a cancelled call; FAILED_PRECONDITION is 400, not 412), so REST clients
// see what grpc-gateway users expect; an unknown code is 500.
func HTTPStatus(code codes.Code) int {
	switch code {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499 // client closed request (nginx's code; net/http has none)
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError // Unknown, Internal, DataLoss, others
}
