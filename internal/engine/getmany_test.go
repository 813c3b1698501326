package engine_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/engine"
)

// FuzzGetRecords sends hostile Get requests: any type name, any JSON keys,
// any key record bytes. Every answer is either an INVALID_ARGUMENT or
// NOT_FOUND *apierror.Error, or an answer that accounts for every key
// once (found or missing, in order) and says the same when asked again.
func FuzzGetRecords(f *testing.F) {
	te := newEngine(f)
	te.MustWrite(engine.OpInsert, []*anypb.Any{
		te.Rec("shop.User", `{"id": 1, "name": "ann", "email": "a"}`),
		te.Rec("shop.User", `{"id": "-9223372036854775808", "name": "min", "email": "m"}`),
		te.Rec("shop.Member", `{"org": "acme", "id": 7, "handle": "h"}`),
	})
	for _, s := range []struct {
		typ, keys string
		rec       []byte
	}{
		{"shop.User", `[1, 2, "-9223372036854775808"]`, nil},
		{"shop.User", `[{"id": 1}, [1], "1"]`, []byte{0x08, 0x01}},
		{"shop.Member", `[["acme", 7], {"org": "acme", "id": "7"}, ["acme"]]`, []byte{0x0a, 0x04, 'a', 'c', 'm', 'e', 0x10, 0x07}},
		{"shop.Member", `[{"org": "acme", "id": 7, "handle": "x"}]`, nil},
		{"shop.User", `[1.5, null, true, {}, [], [[1]], "x", 1e300]`, []byte{0x08}},
		{"shop.Nope", `[1]`, nil},
		{"", `[]`, nil},
		{"type.googleapis.com/shop.User", `[1]`, nil},
	} {
		f.Add(s.typ, s.keys, s.rec)
	}
	f.Fuzz(func(t *testing.T, typ, keysJSON string, rec []byte) {
		var keys structpb.ListValue
		if err := protojson.Unmarshal([]byte(keysJSON), &keys); err != nil {
			return
		}
		req := &pb.GetRequest{Type: typ, Keys: keys.Values}
		if rec != nil {
			req.KeyRecords = []*anypb.Any{{TypeUrl: "type.googleapis.com/" + typ, Value: rec}}
		}
		n := len(req.Keys) + len(req.KeyRecords)
		resp, err := getRecords(te.E, t.Context(), req)
		if err != nil {
			var ae *apierror.Error
			if !errors.As(err, &ae) || (ae.Code != apierror.InvalidArgument && ae.Code != apierror.NotFound) || ae.Msg == "" {
				t.Fatalf("GetRecords(%v): error %#v, want INVALID_ARGUMENT or NOT_FOUND", req, err)
			}
			return
		}
		if len(resp.Records)+len(resp.Missing) != n {
			t.Fatalf("GetRecords(%v) = %v: does not account for %d keys", req, resp, n)
		}
		for i, m := range resp.Missing {
			if int(m) >= n || (i > 0 && m <= resp.Missing[i-1]) {
				t.Fatalf("GetRecords(%v): missing %v is not ascending positions below %d", req, resp.Missing, n)
			}
		}
		for _, r := range resp.Records {
			if r.TypeUrl != "type.googleapis.com/"+typ {
				t.Fatalf("GetRecords(%v): a record of %s", req, r.TypeUrl)
			}
		}
		again, err := getRecords(te.E, t.Context(), req)
		if err != nil || !proto.Equal(again, resp) {
			t.Fatalf("GetRecords(%v) again: %v %v, first %v", req, again, err, resp)
		}
	})
}
