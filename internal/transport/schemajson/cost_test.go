package schemajson

import (
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// costResolver resolves a record type c.R with a field of each shape the
// estimates must bound.
func costResolver(t testing.TB) *Resolver {
	t.Helper()
	field := func(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, repeated bool, typeName string) *descriptorpb.FieldDescriptorProto {
		label := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
		if repeated {
			label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED
		}
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Type: typ.Enum(), Label: label.Enum(), JsonName: proto.String(name)}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	T := descriptorpb.FieldDescriptorProto_TYPE_INT64
	fd := &descriptorpb.FileDescriptorProto{
		Name: proto.String("c.proto"), Package: proto.String("c"), Syntax: proto.String("proto3"),
		Dependency: []string{"google/protobuf/any.proto"},
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Sub"), Field: []*descriptorpb.FieldDescriptorProto{field("a", 1, T, false, "")}},
			{Name: proto.String("R"), Field: []*descriptorpb.FieldDescriptorProto{
				field("v", 2, T, true, ""),
				field("s", 3, descriptorpb.FieldDescriptorProto_TYPE_STRING, true, ""),
				field("big", 4, descriptorpb.FieldDescriptorProto_TYPE_STRING, false, ""),
				field("raw", 5, descriptorpb.FieldDescriptorProto_TYPE_BYTES, false, ""),
				field("subs", 6, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, true, ".c.Sub"),
				field("f", 7, descriptorpb.FieldDescriptorProto_TYPE_FIXED32, true, ""),
				field("inner", 8, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, true, ".google.protobuf.Any"),
				field("d", 9, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, true, ""),
			}},
		},
	}
	f, err := protodesc.NewFile(fd, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	files := new(protoregistry.Files)
	if err := files.RegisterFile(f); err != nil {
		t.Fatal(err)
	}
	return New(func() *protoregistry.Files { return files })
}

// alloc is what f allocates in all.
func alloc(f func()) int64 {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return int64(m1.TotalAlloc - m0.TotalAlloc)
}

// The estimates bound what protojson allocates to render a response
// holding a record of each hostile shape, and to parse that JSON back,
// and stay within a small factor of it (a larger one refuses answers that
// fit).
func TestCostBoundsProtojson(t *testing.T) {
	r := costResolver(t)
	const n = 1 << 15
	repeat := func(f func(b []byte, i int) []byte) []byte {
		var b []byte
		for i := range n {
			b = f(b, i)
		}
		return b
	}
	packed := func(num protowire.Number, p []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), p)
	}
	sub := protowire.AppendBytes(protowire.AppendTag(nil, 6, protowire.BytesType), nil)
	innerAny := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("type.googleapis.com/c.R"))
	innerAny = protowire.AppendBytes(protowire.AppendTag(innerAny, 2, protowire.BytesType), sub)
	for _, c := range []struct {
		name string
		rec  []byte
	}{
		{"packed small int64", packed(2, repeat(func(b []byte, i int) []byte { return protowire.AppendVarint(b, uint64(i%100)) }))},
		{"packed large int64", packed(2, repeat(func(b []byte, i int) []byte { return protowire.AppendVarint(b, 1<<62+uint64(i)) }))},
		{"packed fixed32", packed(7, repeat(func(b []byte, i int) []byte { return protowire.AppendFixed32(b, uint32(i)) }))},
		{"packed double", packed(9, repeat(func(b []byte, i int) []byte { return protowire.AppendFixed64(b, uint64(i)) }))},
		{"unpacked int64", repeat(func(b []byte, i int) []byte {
			return protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), uint64(i%100))
		})},
		{"empty strings", repeat(func(b []byte, _ int) []byte {
			return protowire.AppendBytes(protowire.AppendTag(b, 3, protowire.BytesType), nil)
		})},
		{"empty messages", repeat(func(b []byte, _ int) []byte { return append(b, sub...) })},
		{"nested anys", repeat(func(b []byte, _ int) []byte {
			return protowire.AppendBytes(protowire.AppendTag(b, 8, protowire.BytesType), innerAny)
		})},
		{"control characters", packed(4, []byte(strings.Repeat("\x01", n)))},
		{"plain string", packed(4, []byte(strings.Repeat("a", 16*n)))},
		{"utf-8 string", packed(4, []byte(strings.Repeat("日本", 4*n)))},
		{"bytes", packed(5, []byte(strings.Repeat("\x00", 16*n)))},
	} {
		resp := &pb.QueryResponse{Records: []*anypb.Any{{TypeUrl: "type.googleapis.com/c.R", Value: c.rec}}}
		var js []byte
		enc := alloc(func() {
			var err error
			if js, err = (protojson.MarshalOptions{Resolver: r}).Marshal(resp); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		})
		dec := alloc(func() {
			if err := Unmarshal(protojson.UnmarshalOptions{Resolver: r}, js, new(pb.QueryResponse)); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		})
		est, dest := r.EncodeCost(resp), DecodeCost(js)
		t.Logf("%-20s wire %8d json %8d  render %10d estimate %10d (%.1f×)  parse %10d estimate %10d (%.1f×)",
			c.name, len(c.rec), len(js), enc, est, float64(est)/float64(enc), dec, dest, float64(dest)/float64(dec))
		if est < enc || dest < dec {
			t.Errorf("%s: estimates %d and %d below the allocations %d and %d", c.name, est, dest, enc, dec)
		}
		if est > 10*enc || dest > 10*dec {
			t.Errorf("%s: estimates %d and %d over ten times the allocations %d and %d", c.name, est, dest, enc, dec)
		}
	}
}

// Hostile wire bytes give an estimate, never a panic.
func FuzzEncodeCost(f *testing.F) {
	f.Add([]byte{0x32, 0x02, 0x01, 0x02})
	f.Add([]byte{0x42, 0x03, 0x12, 0x01, 0x00})
	f.Add([]byte{0x0b, 0x0c})
	r := New(nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, url := range []string{"type.googleapis.com/protobase.v1.Index", "type.googleapis.com/google.protobuf.Any", "type.googleapis.com/x.Nope"} {
			if n := r.EncodeCost(&pb.QueryResponse{Records: []*anypb.Any{{TypeUrl: url, Value: b}}}); n <= 0 {
				t.Fatalf("%s: estimate %d", url, n)
			}
		}
		if n := DecodeCost(b); n < 2*int64(len(b)) {
			t.Fatalf("decode estimate %d for %d bytes", n, len(b))
		}
	})
}

// BenchmarkEncodeCost sets the estimate's walk beside the rendering it
// guards, for a response of 1,000 records of a dozen fields:
// go test -run '^$' -bench 'EncodeCost|Render' ./internal/transport/schemajson/
func BenchmarkEncodeCost(b *testing.B) {
	r, resp := benchResponse(b)
	b.ResetTimer()
	for range b.N {
		if r.EncodeCost(resp) <= 0 {
			b.Fatal("no estimate")
		}
	}
}

func BenchmarkRender(b *testing.B) {
	r, resp := benchResponse(b)
	b.ResetTimer()
	for range b.N {
		if _, err := (protojson.MarshalOptions{Resolver: r}).Marshal(resp); err != nil {
			b.Fatal(err)
		}
	}
}

// benchResponse is a QueryResponse of 1,000 c.R records, each of a few
// numbers, strings and a message.
func benchResponse(b *testing.B) (*Resolver, *pb.QueryResponse) {
	r := costResolver(b)
	resp := &pb.QueryResponse{}
	for i := range 1000 {
		rec := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte{byte(i), 2, 3, 4, 5})
		for _, s := range []string{"ann", "ann@example.com", "Berlin"} {
			rec = protowire.AppendBytes(protowire.AppendTag(rec, 3, protowire.BytesType), []byte(s))
		}
		rec = protowire.AppendBytes(protowire.AppendTag(rec, 4, protowire.BytesType), []byte("a note of some forty bytes, give or take"))
		rec = protowire.AppendBytes(protowire.AppendTag(rec, 6, protowire.BytesType), []byte{8, 42})
		resp.Records = append(resp.Records, &anypb.Any{TypeUrl: "type.googleapis.com/c.R", Value: rec})
	}
	return r, resp
}
