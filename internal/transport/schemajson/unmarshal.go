package schemajson

import (
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
)

// Unmarshal decodes the JSON object b into m with opts (whose Resolver
// should be a *Resolver). It differs from opts.Unmarshal only when b does
// not decode, and only for messages that carry records (*pb.WriteRequest,
// *pb.WriteStreamRequest, a bare *anypb.Any):
//
//   - A record whose "@type" is not in the schema is kept with its type URL
//     and no bytes, and decoding goes on, so that the engine refuses it with
//     exactly the error (code and WriteError) a protobuf client gets.
//   - Any other error is an *apierror.Error with INVALID_ARGUMENT and a
//     WriteError naming the record that does not decode and its type.
//
// The record-by-record pass runs only on the error path: a valid object is
// parsed once.
func Unmarshal(opts protojson.UnmarshalOptions, b []byte, m proto.Message) error {
	perr := opts.Unmarshal(b, m)
	if perr == nil {
		return nil
	}
	switch m := m.(type) {
	case *anypb.Any:
		if url, unknown := unknownType(opts, b); unknown {
			proto.Reset(m)
			m.TypeUrl = url
			return nil
		}
		return badRecord(-1, "", perr)
	case *pb.WriteRequest, *pb.WriteStreamRequest:
		return locate(opts, b, m, perr)
	}
	return apierror.Errorf(apierror.InvalidArgument, "invalid JSON: %w", perr)
}

// unknownType reports whether the object b names in "@type" a type that
// opts cannot resolve.
func unknownType(opts protojson.UnmarshalOptions, b []byte) (string, bool) {
	var head struct {
		Type string `json:"@type"`
	}
	if json.Unmarshal(b, &head) != nil || head.Type == "" || opts.Resolver == nil {
		return head.Type, false
	}
	_, err := opts.Resolver.FindMessageByURL(head.Type)
	return head.Type, err != nil
}

// locate re-reads a batch that failed to decode, part by part.
func locate(opts protojson.UnmarshalOptions, b []byte, m proto.Message, perr error) error {
	whole := badRecord(-1, "", perr)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return whole
	}
	proto.Reset(m)
	for k, v := range raw {
		if k == "records" {
			continue
		}
		// The other fields of the batch (op, ack), each alone.
		one, err := json.Marshal(map[string]json.RawMessage{k: v})
		if err != nil {
			return whole
		}
		if err := opts.Unmarshal(one, m); err != nil {
			return badRecord(-1, "", err)
		}
	}
	var list []json.RawMessage
	if r, ok := raw["records"]; ok && string(r) != "null" {
		if err := json.Unmarshal(r, &list); err != nil {
			return badRecord(-1, "", err)
		}
	}
	recs := make([]*anypb.Any, 0, len(list))
	substituted := false
	for i, r := range list {
		a := new(anypb.Any)
		if err := opts.Unmarshal(r, a); err != nil {
			url, unknown := unknownType(opts, r)
			if !unknown {
				return badRecord(i, url, err)
			}
			a = &anypb.Any{TypeUrl: url}
			substituted = true
		}
		recs = append(recs, a)
	}
	if !substituted {
		// Every part decodes alone, so the object as a whole is at fault
		// (a duplicated key, say).
		return whole
	}
	switch m := m.(type) {
	case *pb.WriteRequest:
		m.Records = recs
	case *pb.WriteStreamRequest:
		m.Records = recs
	}
	return nil
}

// badRecord is the error of a record that is not valid JSON for its type;
// record -1 blames the message as a whole (the detail then says record 0).
func badRecord(record int, typeURL string, err error) error {
	we := &pb.WriteError{TypeUrl: typeURL, Reason: "invalid JSON: " + err.Error()}
	if record >= 0 {
		we.Record = uint64(record)
	}
	return &apierror.Error{Code: apierror.InvalidArgument, Msg: we.Reason, Write: we, Err: err}
}
