package client

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Limits are a server's limits on one write request. A Writer never sends
// a batch over them: it refuses a record that cannot fit in any batch, and
// a batch size over MaxBatchRecords, before anything is sent.
type Limits struct {
	// MaxBatchRecords is the most records one batch may hold (server:
	// --max-batch-records).
	MaxBatchRecords int
	// MaxMessageBytes is the largest request message the server takes
	// (server: --max-message-bytes).
	MaxMessageBytes int
}

// DefaultLimits are the limits of a server started with default settings.
var DefaultLimits = Limits{MaxBatchRecords: 10000, MaxMessageBytes: 64 << 20}

// LimitsOf returns the write limits a GetSchema response reports; what it
// does not report (an older server) is taken from DefaultLimits.
func LimitsOf(resp *pb.GetSchemaResponse) Limits {
	l := Limits{
		MaxBatchRecords: int(resp.GetWriteLimits().GetMaxBatchRecords()),
		MaxMessageBytes: int(resp.GetWriteLimits().GetMaxMessageBytes()),
	}
	return l.withDefaults()
}

func (l Limits) withDefaults() Limits {
	if l.MaxBatchRecords <= 0 {
		l.MaxBatchRecords = DefaultLimits.MaxBatchRecords
	}
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = DefaultLimits.MaxMessageBytes
	}
	return l
}

// A LimitError is a batch size or a record that a Writer refuses because
// the server would refuse it. Nothing of it was sent.
type LimitError struct {
	// Limit is "max_batch_records" or "max_message_bytes".
	Limit string
	// Max is the server's limit; Got is what was asked: records per batch,
	// or the bytes of a request holding the one record.
	Max, Got int
}

func (e *LimitError) Error() string {
	if e.Limit == "max_batch_records" {
		return fmt.Sprintf("a batch of %d records is over the server's limit of %d records per batch (max_batch_records)", e.Got, e.Max)
	}
	return fmt.Sprintf("a record of %d bytes is over the server's limit of %d bytes per request (max_message_bytes)", e.Got, e.Max)
}

// dialMaxSendBytes is the largest message Dial lets the client send
// (grpc.MaxCallSendMsgSize): a Writer keeps its batches under it too,
// whatever the server would take.
const dialMaxSendBytes = 64 << 20

// requestOverhead bounds the bytes of a WriteStreamRequest besides its
// records: the op and ack fields.
const requestOverhead = 16

// recordBytes is what a record adds to the encoded request: its field tag,
// length and the Any itself.
func recordBytes(a *anypb.Any) int {
	return protowire.SizeTag(2) + protowire.SizeBytes(proto.Size(a))
}
