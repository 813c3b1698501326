package engine

import (
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// A Search or Scan stream's ends are what a transport offers: a source of
// requests and a sink of responses. The engine needs only the small
// interfaces SearchSource, SearchSink and ScanSink, which any transport
// implements with messages. What a transport can do beyond them it says by
// implementing an optional interface, which the engine finds by type
// assertion and then uses for a faster path:
//
//   - EncodingSink: Send encodes a response before it returns, so the
//     engine builds responses in messages and buffers it reuses (arena.go,
//     scanBuf).
//   - WireSink: the sink takes any response as its wire bytes, so the
//     engine writes them straight from the records' bytes (searchenc.go,
//     searchrange.go).
//   - LookupWireSink: the same for the responses to requests of plain
//     primary-key lookups only, for a sink that must see every other
//     response as a message.
//   - WireSource: the source hands over each request as its wire bytes,
//     so the engine runs a request of plain primary-key lookups from them
//     (searchwire.go).
//   - Recycler: the source decodes a request over the messages of one the
//     engine is done with.
//
// Whatever the path, the bytes a client receives are the same.

// SearchSource is where a Search stream's requests come from.
type SearchSource interface {
	// Recv returns the next request (io.EOF when the client is done). It
	// is called from one goroutine.
	Recv() (*pb.SearchRequest, error)
}

// SearchSink is where a Search stream's responses go.
type SearchSink interface {
	// Send sends one response; it is called from one goroutine at a time.
	// It releases h, the response's bytes of the result budget, once it
	// no longer holds the response's bytes, whatever it returns (see
	// Hold).
	Send(resp *pb.SearchResponse, h Hold) error
}

// ScanSink is where a Scan's responses go.
type ScanSink interface {
	// Send sends one response; it is called from one goroutine at a time.
	// It releases h as SearchSink.Send does.
	Send(resp *pb.ScanResponse, h Hold) error
}

// EncodingSink is implemented by a SearchSink or ScanSink whose Send has
// encoded the response, and keeps no reference to it or to anything it
// references, by the time it returns (gRPC's SendMsg with the server's
// codec; the REST gateway's stream). The engine then builds the responses
// of Search requests run on the receiving goroutine, and a Scan's
// responses, in messages and buffers reused from response to response.
type EncodingSink interface {
	// EncodesOnSend marks the sink; the engine never calls it.
	EncodesOnSend()
}

// WireSink is implemented by a SearchSink that also takes a response as its
// wire bytes (proto.Marshal's encoding of a SearchResponse), for a
// transport whose responses are protobuf bytes and that need not see them
// as messages. The engine then writes as wire bytes the responses of
// requests of plain primary-key lookups run on the receiving goroutine,
// and those of a request of one query of another kind, sent by the query's
// worker.
type WireSink interface {
	// SendWire sends the response b, keeping no reference to b once it
	// returns; it takes turns with Send. It releases h as Send does.
	SendWire(b []byte, h Hold) error
}

// LookupWireSink is WireSink for a sink that may take only the responses
// to requests of plain primary-key lookups as wire bytes: one that must
// see every other response as a message (a key's scope guard rewrites the
// errors of queries it refused, which are never plain lookups). A sink
// that implements WireSink need not implement it.
type LookupWireSink interface {
	// SendLookupWire is WireSink.SendWire for the responses to a request
	// of plain primary-key lookups.
	SendLookupWire(b []byte, h Hold) error
}

// WireSource is implemented by a SearchSource that can also hand over each
// request as its wire bytes. The engine runs a request of plain
// primary-key lookups from its bytes, and has any other decoded.
type WireSource interface {
	// RecvWire is used instead of Recv: it returns the next request's
	// wire bytes, valid until the next call (io.EOF when the client is
	// done). The bytes are nil when the request must be decoded (it is
	// over a limit Recv enforces).
	RecvWire() ([]byte, error)
	// DecodeWire decodes the request RecvWire last returned as Recv would
	// have received it, with Recv's errors.
	DecodeWire() (*pb.SearchRequest, error)
	// MaxQueries, when positive, is the most queries Recv takes in one
	// request: a request of more is decoded (and refused), not run from
	// its bytes, so that the source need not count every request's
	// queries beforehand.
	MaxQueries() int
}

// Recycler is implemented by a SearchSource that can decode the next
// request into the messages of one the engine is done with.
type Recycler interface {
	// Recycle is given each request the engine will not read again. It is
	// called on the goroutine that calls Recv, between two calls.
	Recycle(req *pb.SearchRequest)
}

// searchFuncs is the SearchSource and SearchSink of Search.
type searchFuncs struct {
	recv func() (*pb.SearchRequest, error)
	send func(*pb.SearchResponse) error
}

func (f *searchFuncs) Recv() (*pb.SearchRequest, error) { return f.recv() }

func (f *searchFuncs) Send(resp *pb.SearchResponse, h Hold) error {
	defer h.Release()
	return f.send(resp)
}

// scanFunc is the ScanSink of Scan.
type scanFunc func(*pb.ScanResponse) error

func (f scanFunc) Send(resp *pb.ScanResponse, h Hold) error {
	defer h.Release()
	return f(resp)
}
