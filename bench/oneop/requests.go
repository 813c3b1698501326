package oneop

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/protobase/protobase/bench"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// requestsPerFile is how many requests each file of --requests-dir holds;
// a load generator cycles through them.
const requestsPerFile = 1000

// Files written by --requests-dir, one per unary call.
const (
	getRequestsFile    = "get.bin"
	queryRequestsFile  = "query.bin"
	healthRequestsFile = "health.bin"
)

// writeRequests writes, in dir, the unary requests of the get, query and
// health rows as an independent load generator sends them: each file a
// sequence of messages, each preceded by its length as a varint (ghz's
// --binary-file format). Get and Query ask for one loaded record by key,
// drawn uniformly; Query's condition is the text filter "id == N". Encoded
// ahead, the requests cost the generator the same to send whichever the
// call, as the health check's empty one does.
func writeRequests(dir string, records int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--requests-dir: %w", err)
	}
	rng := rand.New(rand.NewPCG(uint64(records), 0x72657173))
	gets := make([]proto.Message, requestsPerFile)
	queries := make([]proto.Message, requestsPerFile)
	for i := range gets {
		id := rng.Int64N(int64(records))
		gets[i] = &pb.GetRequest{Type: bench.ItemType, Keys: []*structpb.Value{structpb.NewStringValue(strconv.FormatInt(id, 10))}}
		queries[i] = &pb.QueryRequest{Query: &pb.Query{Type: bench.ItemType, Filter: "id == " + strconv.FormatInt(id, 10)}}
	}
	for _, f := range []struct {
		name string
		msgs []proto.Message
	}{
		{getRequestsFile, gets},
		{queryRequestsFile, queries},
		{healthRequestsFile, []proto.Message{&healthpb.HealthCheckRequest{}}},
	} {
		if err := writeDelimited(filepath.Join(dir, f.name), f.msgs); err != nil {
			return fmt.Errorf("--requests-dir: %w", err)
		}
	}
	return nil
}

func writeDelimited(path string, msgs []proto.Message) error {
	f, err := os.Create(path) //nolint:gosec // the operator names the directory
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, m := range msgs {
		if _, err := protodelim.MarshalTo(w, m); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
