package proto_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	_ "google.golang.org/genproto/googleapis/api/annotations" // registers google.api.http

	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
	protofs "github.com/protobase/protobase/proto"
)

// TestGeneratedCodeIsCurrent compiles the .proto sources and compares them
// with the descriptors embedded in gen/: an edit to proto/ without
// `make generate` fails here, without needing buf in CI.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(readAll(t)),
	})}
	generated := map[string]protoreflect.FileDescriptor{
		"protobase/v1/options.proto":    pb.File_protobase_v1_options_proto,
		"protobase/v1/protobase.proto":  pb.File_protobase_v1_protobase_proto,
		"protobase/v1/service.proto":    pbgrpc.File_protobase_v1_service_proto,
		"protobase/lab/v1/lab.proto":    labv1.File_protobase_lab_v1_lab_proto,
		"protobase/lab/v1/layout.proto": labv1.File_protobase_lab_v1_layout_proto,
	}
	files, err := c.Compile(context.Background(), "protobase/v1/options.proto", "protobase/v1/protobase.proto", "protobase/v1/service.proto",
		"protobase/lab/v1/lab.proto", "protobase/lab/v1/layout.proto")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		want := protodesc.ToFileDescriptorProto(generated[f.Path()])
		got := protodesc.ToFileDescriptorProto(f)
		want, got = normalize(t, want), normalize(t, got)
		if !proto.Equal(want, got) {
			t.Errorf("%s: gen/ is stale; run `make generate` and commit\n%s", f.Path(), diff(want, got))
		}
	}
}

func readAll(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, name := range []string{"protobase/v1/options.proto", "protobase/v1/protobase.proto", "protobase/v1/service.proto", "google/api/annotations.proto", "google/api/http.proto"} {
		b, err := protofs.FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	// The lab API is not embedded (user schemas cannot import it): read it
	// from the source tree.
	for _, name := range []string{"protobase/lab/v1/lab.proto", "protobase/lab/v1/layout.proto"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	return out
}

func diff(a, b proto.Message) string {
	x, _ := prototext.Marshal(a)
	y, _ := prototext.Marshal(b)
	xs, ys := strings.Split(string(x), "\n"), strings.Split(string(y), "\n")
	for i := range min(len(xs), len(ys)) {
		if xs[i] != ys[i] {
			return fmt.Sprintf("line %d:\n generated: %s\n source:    %s", i, xs[i], ys[i])
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(xs), len(ys))
}

// normalize strips source info and re-reads options through the global
// registry, so that extensions (google.api.http) compare as fields whether
// the compiler left them known or unknown.
func normalize(t *testing.T, fd *descriptorpb.FileDescriptorProto) *descriptorpb.FileDescriptorProto {
	fd.SourceCodeInfo = nil
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(fd)
	if err != nil {
		t.Fatal(err)
	}
	out := new(descriptorpb.FileDescriptorProto)
	if err := (proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes}).Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}
