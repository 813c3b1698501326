// Command goclient is the Go side of the Python client's benchmark
// (python/bench/bench.py): it runs the same workloads through the Go
// client package against the same server, so that the two clients are
// measured in one run. It prints one JSON object per workload.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7070", "server address")
	mode := flag.String("mode", "ingest", "ingest (dynamic messages), ingest-bytes (pre-encoded records), search or get")
	n := flag.Int("n", 100000, "records to insert, or lookups to run")
	batch := flag.Int("batch", 1000, "records per write batch, or queries per search request")
	first := flag.Int64("first-id", 0, "first id to insert")
	ids := flag.Int64("ids", 100000, "search: look up ids 0..ids-1")
	flag.Parse()
	if err := run(*addr, *mode, *n, *batch, *first, *ids); err != nil {
		fmt.Fprintln(os.Stderr, "goclient:", err)
		os.Exit(1)
	}
}

// result is one measured workload.
type result struct {
	Mode    string  `json:"mode"`
	N       int     `json:"n"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_sec"`
}

func run(addr, mode string, n, batch int, first, ids int64) error {
	ctx := context.Background()
	c, err := client.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	var elapsed time.Duration
	switch mode {
	case "ingest", "ingest-bytes":
		elapsed, err = ingest(ctx, c, mode == "ingest-bytes", n, batch, first)
	case "search":
		elapsed, err = search(ctx, c, n, batch, ids)
	case "get":
		elapsed, err = get(ctx, c, n, batch, ids)
	default:
		err = fmt.Errorf("unknown -mode %q", mode)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", mode, err)
	}
	return json.NewEncoder(os.Stdout).Encode(result{mode, n, elapsed.Seconds(), float64(n) / elapsed.Seconds()})
}

// itemType returns the descriptor of bench.ItemType from the server's
// schema, as a Go program without generated code would.
func itemType(ctx context.Context, c *client.Client) (protoreflect.MessageDescriptor, error) {
	s, err := c.GetSchema(ctx)
	if err != nil {
		return nil, err
	}
	files, err := protodesc.NewFiles(s.GetDescriptors())
	if err != nil {
		return nil, err
	}
	d, err := files.FindDescriptorByName(bench.ItemType)
	if err != nil {
		return nil, err
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, errors.New(bench.ItemType + " is not a message")
	}
	return md, nil
}

// ingest inserts n items with ids first.. through one Writer; the clock
// covers encoding, batching and the wait until everything is durable.
func ingest(ctx context.Context, c *client.Client, preEncoded bool, n, batch int, first int64) (time.Duration, error) {
	md, err := itemType(ctx, c)
	if err != nil {
		return 0, err
	}
	msgs := make([]proto.Message, 0, n)
	anys := make([]*anypb.Any, 0, n)
	for i := range n {
		id := first + int64(i)
		if preEncoded {
			anys = append(anys, &anypb.Any{TypeUrl: bench.TypeURLPrefix + bench.ItemType, Value: bench.AppendItem(nil, id)})
			continue
		}
		m := dynamicpb.NewMessage(md)
		fields := md.Fields()
		m.Set(fields.ByName("id"), protoreflect.ValueOfInt64(id))
		m.Set(fields.ByName("name"), protoreflect.ValueOfString("name-"+strconv.FormatInt(id%100000, 10)))
		m.Set(fields.ByName("email"), protoreflect.ValueOfString("user"+strconv.FormatInt(id, 10)+"@example.com"))
		m.Set(fields.ByName("created"), protoreflect.ValueOfInt64(1700000000000+id))
		m.Set(fields.ByName("note"), protoreflect.ValueOfString("lorem ipsum dolor sit amet, consectetur adipiscing"))
		msgs = append(msgs, m)
	}
	start := time.Now()
	w, err := c.NewWriter(ctx, client.Insert, client.WriterOptions{BatchRecords: batch})
	if err != nil {
		return 0, err
	}
	for i := range n {
		if preEncoded {
			err = w.WriteAny(anys[i])
		} else {
			err = w.Write(msgs[i])
		}
		if err != nil {
			return 0, err
		}
	}
	if _, err := w.Close(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// search runs n primary-key lookups of ids below ids, batch queries per
// request on one stream, alternating: a batch is sent once every result
// of the one before has arrived.
func search(ctx context.Context, c *client.Client, n, batch int, ids int64) (time.Duration, error) {
	start := time.Now()
	s, err := c.NewSearch(ctx)
	if err != nil {
		return 0, err
	}
	var next int64
	for done := 0; done < n; done += batch {
		qs := make([]*pb.Query, min(batch, n-done))
		for i := range qs {
			qs[i] = bench.LookupQuery(next * 7919 % ids) // scattered, as the lab's lookups
			next++
		}
		rs, err := s.Batch(qs)
		if err != nil {
			return 0, err
		}
		for _, r := range rs {
			for {
				_, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return 0, err
				}
			}
		}
	}
	if err := s.Close(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// get reads n records by primary key, batch keys per Get call, in the
// order search looks them up.
func get(ctx context.Context, c *client.Client, n, batch int, ids int64) (time.Duration, error) {
	start := time.Now()
	var next int64
	for done := 0; done < n; done += batch {
		keys := make([]any, min(batch, n-done))
		for i := range keys {
			keys[i] = next * 7919 % ids
			next++
		}
		recs, err := c.Get(ctx, bench.ItemType, keys...)
		if err != nil {
			return 0, err
		}
		for i, r := range recs {
			if r == nil {
				return 0, fmt.Errorf("key %v: no record", keys[i])
			}
		}
	}
	return time.Since(start), nil
}
