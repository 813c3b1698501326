package apierror

import "strconv"

// Code is what kind of failure an Error is. The values are gRPC's status
// codes (google.rpc.Code), number for number, so that a code crosses every
// transport unchanged: apistatus maps them to gRPC and HTTP statuses.
type Code uint32

// The codes, as google.rpc.Code defines them.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

var codeNames = [...]string{
	OK: "OK", Canceled: "Canceled", Unknown: "Unknown",
	InvalidArgument: "InvalidArgument", DeadlineExceeded: "DeadlineExceeded",
	NotFound: "NotFound", AlreadyExists: "AlreadyExists",
	PermissionDenied: "PermissionDenied", ResourceExhausted: "ResourceExhausted",
	FailedPrecondition: "FailedPrecondition", Aborted: "Aborted",
	OutOfRange: "OutOfRange", Unimplemented: "Unimplemented", Internal: "Internal",
	Unavailable: "Unavailable", DataLoss: "DataLoss", Unauthenticated: "Unauthenticated",
}

// String is the code's name as grpc-go's codes.Code spells it.
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Code(" + strconv.FormatUint(uint64(c), 10) + ")"
}
