package bench

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The lab's record types live in their own package and file so that they
// can be added to an --addr server's schema beside whatever it holds.
//
//go:embed items.proto
var itemsProto string

// itemsProtoFile is the file's name in the server's schema.
const itemsProtoFile = "protobase_lab/items.proto"

// Names of the kit's record types (items.proto) and the prefix of their
// type URLs.
const (
	ItemType        = "protobase_lab.Item"
	IndexedItemType = "protobase_lab.IndexedItem"
	TypeURLPrefix   = "type.googleapis.com/"
)

// ItemSchema returns the schema files declaring ItemType and
// IndexedItemType, for Target.EnsureSchema.
func ItemSchema() map[string]string { return map[string]string{itemsProtoFile: itemsProto} }

// AppendItem appends the encoding of item id (about 100 bytes, the size
// the seeds' messages had) to dst without allocating beyond dst's growth.
func AppendItem(dst []byte, id int64) []byte {
	var num [20]byte
	dst = protowire.AppendTag(dst, 1, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(id))
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	s := strconv.AppendInt(num[:0], id%100000, 10)
	dst = protowire.AppendVarint(dst, uint64(5+len(s)))
	dst = append(append(dst, "name-"...), s...)
	dst = protowire.AppendTag(dst, 3, protowire.BytesType)
	s = strconv.AppendInt(num[:0], id, 10)
	dst = protowire.AppendVarint(dst, uint64(4+len(s)+12))
	dst = append(append(append(dst, "user"...), s...), "@example.com"...)
	dst = protowire.AppendTag(dst, 4, protowire.VarintType)
	dst = protowire.AppendVarint(dst, 1700000000000+uint64(id))
	dst = protowire.AppendTag(dst, 5, protowire.BytesType)
	dst = protowire.AppendString(dst, "lorem ipsum dolor sit amet, consectetur adipiscing")
	return dst
}

// AppendWriteRecords appends to dst the encoding of the records field
// (field 1 of WriteRequest, field 2 of WriteStreamRequest) holding n items
// of type typeName with ids first, first+1, …, and returns dst and the
// bytes of record values it holds. Encoding straight into one buffer
// keeps the ingest loop at one allocation per batch.
func AppendWriteRecords(dst []byte, field protowire.Number, typeName string, first int64, n int) ([]byte, int64) {
	url := TypeURLPrefix + typeName
	var item []byte
	var payload int64
	for i := 0; i < n; i++ {
		item = AppendItem(item[:0], first+int64(i))
		payload += int64(len(item))
		anyLen := protowire.SizeTag(1) + protowire.SizeBytes(len(url)) + protowire.SizeTag(2) + protowire.SizeBytes(len(item))
		dst = protowire.AppendTag(dst, field, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(anyLen))
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, url)
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendBytes(dst, item)
	}
	return dst, payload
}

// LookupQuery is a primary-key lookup of item id.
func LookupQuery(id int64) *pb.Query {
	return &pb.Query{
		Type: ItemType,
		Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
			Field: "id", Op: pb.Op_OP_EQ, Value: &pb.Value{Kind: &pb.Value_Int{Int: id}},
		}}},
	}
}

// SearchFrames encodes SearchRequests of batch lookups each, walking the
// ids 0..records-1 in a scattered order so that consecutive lookups do not
// hit neighbouring keys, with as many requests as it takes to cover every
// id once (at least one).
func SearchFrames(batch, records int) ([]Frame, error) {
	n := max(1, (records+batch-1)/batch)
	frames := make([]Frame, 0, n)
	// A stride coprime with records visits every id once.
	stride := int64(7919)
	for gcd(stride, int64(records)) != 1 {
		stride++
	}
	var id int64
	for i := 0; i < n; i++ {
		req := &pb.SearchRequest{Queries: make([]*pb.Query, batch)}
		for j := range req.Queries {
			req.Queries[j] = LookupQuery(id)
			id = (id + stride) % int64(records)
		}
		f, err := EncodeFrame(req)
		if err != nil {
			return nil, err
		}
		frames = append(frames, f)
	}
	return frames, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// LoadItems applies ItemSchema (in add mode) and upserts items 0..n-1 of
// type ItemType (upsert, so that an --addr server that already holds them
// loads again harmlessly), showing progress on p (nil for none).
func (t *Target) LoadItems(ctx context.Context, p Progress, n int) error {
	if err := t.EnsureSchema(ctx, ItemSchema()); err != nil {
		return err
	}
	if p == nil {
		p = NoProgress{}
	}
	task := p.Task(fmt.Sprintf("load %d records", n), (n+999)/1000)
	defer task.Done("")
	st, err := t.API.Upsert(ctx)
	if err != nil {
		return fmt.Errorf("load: open stream: %w", err)
	}
	const batch = 1000
	var backing []byte
	for first := 0; first < n; first += batch {
		m := min(batch, n-first)
		req := &pb.WriteRequest{Records: make([]*anypb.Any, m)}
		backing = make([]byte, 0, m*110)
		for i := range req.Records {
			start := len(backing)
			backing = AppendItem(backing, int64(first+i))
			req.Records[i] = &anypb.Any{TypeUrl: TypeURLPrefix + ItemType, Value: backing[start:len(backing):len(backing)]}
		}
		if err := st.Send(req); err != nil {
			break // the status says why
		}
		task.Step()
	}
	if _, err := st.CloseAndRecv(); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
}

// CompactLoaded compacts an embedded target's store after a bulk load and
// reports whether it did: a load of millions of records leaves compaction
// running for minutes, through any warm-up, and a read experiment should
// measure the steady state instead. An --addr server is not compacted
// (its store is not the lab's to maintain): it returns false.
func (t *Target) CompactLoaded(ctx context.Context, p Progress) (bool, error) {
	if !t.Embedded || t.Server == nil {
		return false, nil
	}
	if p == nil {
		p = NoProgress{}
	}
	task := p.Task("compact the loaded records", 1)
	defer task.Done("")
	if err := t.Server.Compact(ctx); err != nil {
		return false, fmt.Errorf("compact after loading: %w", err)
	}
	task.Step()
	return true, nil
}
