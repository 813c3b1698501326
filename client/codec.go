package client

import (
	"bytes"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/grpcbuf"
	"github.com/protobase/protobase/internal/wire"
)

// The responses that carry records by the million (ScanResponse,
// QueryResponse, SearchResponse), Get's answers, and the changes a
// watcher receives by the hundred thousand a second (WatchResponse) are
// decoded by internal/wire's hand decoders, which point every record's value into the response's
// bytes instead of allocating three times per record as the generated
// decoder does; each gives what proto.Unmarshal gives, and hands the
// shapes it does not cover to it. A record kept by the caller keeps its
// whole response's bytes alive.

var protoCodec = encoding.GetCodecV2("proto")

// callCodec is the codec of every call (Dial makes it the default):
// protobuf, with the hand encoders of the read requests and the hand
// decoders of the read and watch responses. Its name is "proto", so the
// server sees ordinary protobuf. A default rather than an option per call:
// gRPC copies a call's options into a new slice on every call that has
// any.
type callCodec struct{}

// Name implements encoding.CodecV2.
func (callCodec) Name() string { return "proto" }

// Marshal implements encoding.CodecV2. A GetRequest, QueryRequest or
// SearchRequest of the usual shape is encoded by hand
// (wire.AppendGetRequest, wire.AppendQueryRequest,
// wire.AppendSearchRequest) into a pooled buffer (grpcbuf.Sized), which
// gRPC gives back once it has written it.
func (callCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *pb.GetRequest:
		if n, ok := wire.SizeGetRequest(m); ok {
			return grpcbuf.Encoded(m, n, wire.AppendGetRequest), nil
		}
	case *pb.QueryRequest:
		if s, ok := wire.SizeQueryRequest(m); ok {
			return grpcbuf.Encoded(sizedQuery{m, s}, s.Size(), appendSizedQuery), nil
		}
	case *pb.SearchRequest:
		if size, ok := wire.SizeSearchRequest(m); ok {
			return grpcbuf.Encoded(m, size, wire.AppendSearchRequest), nil
		}
	}
	return protoCodec.Marshal(v)
}

// sizedQuery is a QueryRequest with the sizes wire.SizeQueryRequest gave,
// which its encoder takes.
type sizedQuery struct {
	m *pb.QueryRequest
	s wire.QuerySizes
}

func appendSizedQuery(b []byte, q sizedQuery) []byte { return wire.AppendQueryRequest(b, q.m, q.s) }

// Unmarshal implements encoding.CodecV2. The decoded messages keep
// references into their bytes, a copy of the transport's buffers (a
// reused watch response: the buffers themselves, see watchRecv).
func (callCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *pb.ScanResponse:
		return wire.DecodeScanResponse(data.Materialize(), m)
	case *pb.QueryResponse:
		return wire.DecodeQueryResponse(data.Materialize(), m)
	case *pb.SearchResponse:
		return wire.DecodeSearchResponse(data.Materialize(), m)
	case *pb.GetResponse:
		return wire.DecodeGetResponse(data.Materialize(), m)
	case *watchRecv:
		return m.decode(data)
	case *pb.WatchResponse:
		return wire.DecodeWatchResponse(ownCopy(data), m)
	}
	return protoCodec.Unmarshal(data, v)
}

// watchRecv is what a Watcher receives into: the response, decoded into
// slabs that are reused when reuse is set (nothing in them is the
// caller's any more) and replaced otherwise.
type watchRecv struct {
	resp  pb.WatchResponse
	slabs wire.WatchSlabs
	views [][]byte // the transport's buffers of a reused response
	reuse bool
	held  mem.BufferSlice // the transport's buffers the reused slabs point into
}

// decode decodes data into r as proto.Unmarshal would.
//
// Reused, the changes point into the transport's buffers themselves,
// held (a reference taken) until the next decode; else into a copy of
// them, which the changes keep alive as long as the caller keeps them.
func (r *watchRecv) decode(data mem.BufferSlice) error {
	r.release()
	if !r.reuse {
		r.slabs.Renew()
	}
	var ok bool
	if r.reuse {
		r.views = r.views[:0]
		for _, buf := range data {
			r.views = append(r.views, buf.ReadOnlyData())
		}
		ok = r.slabs.Decode(r.views, data.Len(), &r.resp)
	} else {
		b := ownCopy(data)
		ok = r.slabs.Decode([][]byte{b}, len(b), &r.resp)
	}
	if !ok {
		r.slabs = wire.WatchSlabs{}
		return proto.Unmarshal(ownCopy(data), &r.resp)
	}
	if r.reuse {
		data.Ref()
		r.held = data
	}
	return nil
}

// release lets go of the transport's buffers the last response points
// into: back to their pool when reuse is set (nothing in them is the
// caller's any more), else left to the GC, since changes the caller
// keeps point into them.
func (r *watchRecv) release() {
	if r.reuse {
		r.held.Free()
	}
	r.held = nil
}

// ownCopy returns the bytes of data in a new array that is not zeroed
// first (bytes.Join): a watch response is about 200 KB, every byte of
// which the copy writes anyway.
func ownCopy(data mem.BufferSlice) []byte {
	var arr [16][]byte
	parts := arr[:0]
	for _, buf := range data {
		parts = append(parts, buf.ReadOnlyData())
	}
	return bytes.Join(parts, nil)
}
