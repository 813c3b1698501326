package wire

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// A SearchResponse carries the records of several queries, each query's in
// a ResultBatch of its own: DecodeSearchResponse decodes it as
// DecodeScanResponse does Scan's, with the records of every batch of one response in one slab. A response
// of 1,000 one-record batches (1,000 primary-key lookups) then costs a
// handful of allocations, not 1,000 × 3 for the records plus the batches.
// A QueryDone of a query and a count (each query's last part) is decoded
// here; one with a plan, and QueryError and a batch's Plan, which are few,
// go through proto.Unmarshal one by one into slabs of their own.
//
// A response of any other shape (an unknown field, a field of an
// unexpected wire type, an Any holding more than type_url and value) goes
// to proto.Unmarshal whole, as does one where a part fails to decode, so
// that the result and the error are always proto.Unmarshal's
// (FuzzDecodeSearchResponse checks it).

// searchRespShape is what a SearchResponse holds, counted before decoding so
// that every slab is allocated once, at its size.
type searchRespShape struct{ batches, records, done, errors int }

// count checks that b has the shape DecodeSearchResponse takes and counts
// its parts; false sends b to proto.Unmarshal.
func (sh *searchRespShape) count(b []byte) bool {
	for rest := b; len(rest) > 0; {
		num, typ, l := protowire.ConsumeTag(rest)
		if l < 0 || typ != protowire.BytesType {
			return false
		}
		v, m := protowire.ConsumeBytes(rest[l:])
		if m < 0 {
			return false
		}
		rest = rest[l+m:]
		switch num {
		case SearchResponseResults:
			n, ok := CountRecords(v, ResultBatchRecords, batchField)
			if !ok {
				return false
			}
			sh.batches++
			sh.records += n
		case SearchResponseDone:
			sh.done++
		case SearchResponseErrors:
			sh.errors++
		default:
			return false
		}
	}
	return true
}

// batchField accepts the fields of a ResultBatch besides its records.
func batchField(num protowire.Number, typ protowire.Type, _ uint64, s []byte) bool {
	if num == ResultBatchVersions && typ == protowire.BytesType {
		return validPacked(s)
	}
	return (num == ResultBatchQuery && typ == protowire.VarintType) ||
		(num == ResultBatchPlan && typ == protowire.BytesType)
}

// searchSlabs hold the parts of one decoded SearchResponse.
type searchSlabs struct {
	anys    []anypb.Any
	recs    []*anypb.Any // every batch's Records is a part of it
	next    int          // the first unused element of anys and recs
	url     string       // the last type URL, shared by the records repeating it
	batches []pb.ResultBatch
	done    []pb.QueryDone
	errs    []pb.QueryError
}

// DecodeSearchResponse decodes b into m as proto.Unmarshal would. m keeps
// references into b: b must be the caller's own copy.
func DecodeSearchResponse(b []byte, m *pb.SearchResponse) error {
	var sh searchRespShape
	if !sh.count(b) {
		return proto.Unmarshal(b, m)
	}
	var s searchSlabs
	m.Reset()
	if sh == (searchRespShape{batches: 1, records: 1, done: 1}) {
		// The answer to one primary-key lookup: its parts in one
		// allocation, not six.
		o := new(oneRecordResponse)
		o.results[0], o.done[0] = &o.batch[0], &o.doneMsg[0]
		s = searchSlabs{anys: o.anys[:], recs: o.recs[:], batches: o.batch[:], done: o.doneMsg[:]}
		m.Results, m.Done = o.results[:], o.done[:]
	} else {
		s = searchSlabs{
			anys:    make([]anypb.Any, sh.records),
			recs:    make([]*anypb.Any, sh.records),
			batches: make([]pb.ResultBatch, sh.batches),
			done:    make([]pb.QueryDone, sh.done),
			errs:    make([]pb.QueryError, sh.errors),
		}
		m.Results = slabPointers(s.batches)
		m.Done = slabPointers(s.done)
		m.Errors = slabPointers(s.errs)
	}
	var nb, nd, ne int
	for rest := b; len(rest) > 0; {
		num, _, l := protowire.ConsumeTag(rest)
		v, n := protowire.ConsumeBytes(rest[l:])
		rest = rest[l+n:]
		var err error
		switch num {
		case SearchResponseResults:
			err = s.batch(v, &s.batches[nb])
			nb++
		case SearchResponseDone:
			err = decodeDone(v, &s.done[nd])
			nd++
		case SearchResponseErrors:
			err = proto.Unmarshal(v, &s.errs[ne])
			ne++
		}
		if err != nil {
			// proto.Unmarshal fails too, with the error to report.
			return proto.Unmarshal(b, m)
		}
	}
	return nil
}

// oneRecordResponse holds the parts of a SearchResponse of one record in
// one batch and one completion, the slabs and the lists of each of one
// element (the lists are full, so appending to one moves it out).
type oneRecordResponse struct {
	anys    [1]anypb.Any
	recs    [1]*anypb.Any
	batch   [1]pb.ResultBatch
	doneMsg [1]pb.QueryDone
	results [1]*pb.ResultBatch
	done    [1]*pb.QueryDone
}

// batch decodes the ResultBatch b, which count accepted, into rb.
func (s *searchSlabs) batch(b []byte, rb *pb.ResultBatch) error {
	start := s.next
	for rest := b; len(rest) > 0; {
		num, typ, l := protowire.ConsumeTag(rest)
		rest = rest[l:]
		if typ == protowire.VarintType { // the query: the last one wins, as in proto.Unmarshal
			v, n := protowire.ConsumeVarint(rest)
			rest = rest[n:]
			rb.Query = v
			continue
		}
		v, n := protowire.ConsumeBytes(rest)
		rest = rest[n:]
		if num == ResultBatchVersions { // well formed: count read it
			rb.Versions, _ = readPacked(rb.Versions, v)
			continue
		}
		if num == ResultBatchPlan {
			// A message field repeated on the wire merges, as in proto.Unmarshal.
			if rb.Plan == nil {
				rb.Plan = new(pb.Plan)
			}
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(v, rb.Plan); err != nil {
				return err
			}
			continue
		}
		a := &s.anys[s.next]
		FillAny(v, a, &s.url)
		s.recs[s.next] = a
		s.next++
	}
	if s.next > start {
		// A full slice expression: appending to one batch's records must
		// never write over the next batch's.
		rb.Records = s.recs[start:s.next:s.next]
	}
	return nil
}

// decodeDone decodes the QueryDone b into d, a zero message, as
// proto.Unmarshal would: by hand when b holds only the query and the count
// as varints (the last of each wins), else through proto.Unmarshal.
func decodeDone(b []byte, d *pb.QueryDone) error {
	for rest := b; len(rest) > 0; {
		num, typ, v, _, n := nextField(rest)
		if n < 0 || typ != protowire.VarintType || (num != QueryDoneQuery && num != QueryDoneCount) {
			return proto.Unmarshal(b, d)
		}
		rest = rest[n:]
		if num == QueryDoneQuery {
			d.Query = v
		} else {
			d.Count = v
		}
	}
	return nil
}

// slabPointers points at every element of slab; nil for none, as
// proto.Unmarshal leaves an absent repeated field.
func slabPointers[T any](slab []T) []*T {
	if len(slab) == 0 {
		return nil
	}
	ps := make([]*T, len(slab))
	for i := range slab {
		ps[i] = &slab[i]
	}
	return ps
}
