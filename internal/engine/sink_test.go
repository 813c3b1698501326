package engine_test

import (
	"fmt"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/engine"
)

// The Search and Scan ends of the tests, made of functions. Which optional
// interfaces of the engine (sink.go) a test's end implements is its type.

// recvFunc is a SearchSource.
type recvFunc func() (*pb.SearchRequest, error)

func (f recvFunc) Recv() (*pb.SearchRequest, error) { return f() }

// recyclingSource is a SearchSource and an engine.Recycler.
type recyclingSource struct {
	recvFunc
	recycle func(*pb.SearchRequest)
}

func (s recyclingSource) Recycle(req *pb.SearchRequest) { s.recycle(req) }

// wireSource is an engine.WireSource handing out reqs as marshalled
// requests, one a call, *next counting them, then io.EOF.
type wireSource struct {
	reqs [][]*pb.Query
	next *int
	b    []byte
}

func (s *wireSource) Recv() (*pb.SearchRequest, error) {
	if _, err := s.RecvWire(); err != nil {
		return nil, err
	}
	return s.DecodeWire()
}

func (s *wireSource) RecvWire() ([]byte, error) {
	if *s.next == len(s.reqs) {
		return nil, io.EOF
	}
	*s.next++
	var err error
	s.b, err = proto.Marshal(&pb.SearchRequest{Queries: s.reqs[*s.next-1]})
	return s.b, err
}

func (s *wireSource) DecodeWire() (*pb.SearchRequest, error) {
	var req pb.SearchRequest
	return &req, proto.Unmarshal(s.b, &req)
}

func (s *wireSource) MaxQueries() int { return 0 }

// sendFunc is a SearchSink that releases a response's hold once it is
// sent.
type sendFunc func(*pb.SearchResponse) error

func (f sendFunc) Send(resp *pb.SearchResponse, h engine.Hold) error {
	defer h.Release()
	return f(resp)
}

// encodingSink is a sendFunc that encodes before it returns
// (engine.EncodingSink).
type encodingSink struct{ sendFunc }

func (encodingSink) EncodesOnSend() {}

// wireSink is a SearchSink that also takes any response as wire bytes
// (engine.WireSink).
type wireSink struct {
	sendFunc
	wire func([]byte) error
}

func (s wireSink) SendWire(b []byte, h engine.Hold) error {
	defer h.Release()
	return s.wire(b)
}

// encodingWireSink is a wireSink that encodes before it returns.
type encodingWireSink struct{ wireSink }

func (encodingWireSink) EncodesOnSend() {}

// lookupWireSink is an encoding SearchSink that takes as wire bytes only
// the responses to plain primary-key lookups (engine.LookupWireSink).
type lookupWireSink struct {
	encodingSink
	wire func([]byte) error
}

func (s lookupWireSink) SendLookupWire(b []byte, h engine.Hold) error {
	defer h.Release()
	return s.wire(b)
}

// scanFunc is a ScanSink; encodingScan, one that encodes before it
// returns.
type scanFunc func(*pb.ScanResponse) error

func (f scanFunc) Send(resp *pb.ScanResponse, h engine.Hold) error {
	defer h.Release()
	return f(resp)
}

type encodingScan struct{ scanFunc }

func (encodingScan) EncodesOnSend() {}

// A sink that takes as wire bytes only the responses to plain primary-key
// lookups (a key's scope guard, which must see the others) gets those as
// bytes and the responses to a lone query of another kind as messages; a
// WireSink gets both as bytes.
func TestLookupWireSinkSeesOtherQueriesAsMessages(t *testing.T) {
	te := openEngine(t, t.TempDir(), engine.Options{})
	te.Apply(map[string]string{"shop.proto": shopProto})
	var recs []*anypb.Any
	for id := range 3 {
		recs = append(recs, te.Rec("shop.User", fmt.Sprintf(`{"id":%d,"name":"n","email":"u%d@x"}`, id, id)))
	}
	te.MustWrite(engine.OpInsert, recs)
	// The lookups run as they arrive and are answered before the scan is
	// read, which its worker then runs alone.
	reqs := [][]*pb.Query{{lookup(1), lookup(2)}, {{Type: "shop.User"}}}
	for _, anyQuery := range []bool{false, true} {
		var wires, msgs, records int
		wire := func(b []byte) error {
			var resp pb.SearchResponse
			if err := proto.Unmarshal(b, &resp); err != nil {
				return err
			}
			wires++
			for _, rb := range resp.Results {
				records += len(rb.Records)
			}
			return nil
		}
		send := func(resp *pb.SearchResponse) error {
			msgs++
			for _, rb := range resp.Results {
				records += len(rb.Records)
			}
			return nil
		}
		var sink engine.SearchSink = lookupWireSink{encodingSink{send}, wire}
		wantWires, wantMsgs := 1, 1
		if anyQuery {
			sink = encodingWireSink{wireSink{send, wire}}
			wantWires, wantMsgs = 2, 0
		}
		next := 0
		if err := te.E.SearchStream(t.Context(), recvReqs(reqs, &next), sink); err != nil {
			t.Fatal(err)
		}
		if wires != wantWires || msgs != wantMsgs || records != 5 {
			t.Errorf("WireSink %v: %d wire responses, %d messages, %d records; want %d, %d, 5",
				anyQuery, wires, msgs, records, wantWires, wantMsgs)
		}
	}
}
