package wire_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/protobase/protobase/gen/protobase/v1" // registers the API's descriptors
	"github.com/protobase/protobase/internal/wire"
)

// apiProto is the API's source, which the generated descriptors are
// compiled from.
const apiProto = "../../proto/protobase/v1/protobase.proto"

// probe is the number of the field the test adds to every coded message.
const probe = 9999

// TestCodersCoverDescriptors holds every hand-written coder to the
// generated descriptors: a field of a coded message that its coder neither
// handles nor falls back for would be dropped by it without a word.
func TestCodersCoverDescriptors(t *testing.T) {
	for _, p := range wire.Uncovered(wire.Coders, globalMessage) {
		t.Error(p)
	}
}

// TestCodersCoverageFindsNewFields shows that the check does what it is
// for: the API's source with a field added to every coded message, compiled
// at run time, has that field reported for every coder of the message.
func TestCodersCoverageFindsNewFields(t *testing.T) {
	src, err := os.ReadFile(apiProto)
	if err != nil {
		t.Fatal(err)
	}
	api := string(src)
	for _, c := range wire.Coders {
		name, ok := strings.CutPrefix(string(c.Message), "protobase.v1.")
		// Matched up to the " =" after the name: QueryRequest's probe
		// must not pass for Query's.
		if ok && !strings.Contains(api, "string completeness_probe_"+strings.ToLower(name)+" =") {
			api = addField(t, api, name, fmt.Sprintf("string completeness_probe_%s = %d;", strings.ToLower(name), probe))
		}
	}
	fd := compileAPI(t, api)
	problems := wire.Uncovered(wire.Coders, func(n protoreflect.FullName) protoreflect.MessageDescriptor {
		if md := fd.Messages().ByName(n.Name()); md != nil && n.Parent() == fd.Package() {
			return md
		}
		return globalMessage(n)
	})
	for _, c := range wire.Coders {
		if c.Message.Parent() != "protobase.v1" {
			continue // google.protobuf.Any is not ours to change
		}
		want := fmt.Sprintf("%s field %d (completeness_probe_%s): the %s %s", c.Message, probe, strings.ToLower(string(c.Message.Name())), c.Coder, c.Direction)
		found := false
		for _, p := range problems {
			found = found || strings.HasPrefix(p, want)
		}
		if !found {
			t.Errorf("a field added to %s is not reported for the %s %s; reported:\n%s", c.Message, c.Coder, c.Direction, strings.Join(problems, "\n"))
		}
	}
	// And nothing else: every other field is covered.
	for _, p := range problems {
		if !strings.Contains(p, fmt.Sprintf("field %d (completeness_probe_", probe)) {
			t.Errorf("unexpected: %s", p)
		}
	}
}

// The coverage check reports a declared field the message lacks, and a
// message that does not exist.
func TestCodersCoverageFindsStaleDeclarations(t *testing.T) {
	stale := []wire.Coverage{
		{Message: "protobase.v1.QueryDone", Coder: "X", Handles: []protoreflect.FieldNumber{1, 2, 3, 77}},
		{Message: "protobase.v1.NoSuch", Coder: "Y"},
	}
	got := wire.Uncovered(stale, globalMessage)
	if len(got) != 2 || !strings.Contains(got[0], "declares field 77") || !strings.Contains(got[1], "no such message") {
		t.Fatalf("got %q", got)
	}
}

func globalMessage(n protoreflect.FullName) protoreflect.MessageDescriptor {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(n)
	if err != nil {
		return nil
	}
	md, _ := d.(protoreflect.MessageDescriptor)
	return md
}

// addField adds the field declaration decl at the end of the top-level
// message name in the .proto source src.
func addField(t *testing.T, src, name, decl string) string {
	t.Helper()
	loc := regexp.MustCompile(`(?m)^message ` + name + ` \{`).FindStringIndex(src)
	if loc == nil {
		t.Fatalf("message %s not found in %s", name, apiProto)
	}
	depth := 0
	for i := loc[1] - 1; i < len(src); i++ {
		switch src[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return src[:i] + "  " + decl + "\n" + src[i:]
			}
		}
	}
	t.Fatalf("message %s is not closed in %s", name, apiProto)
	return ""
}

// compileAPI compiles the API's source src, its imports taken from the
// descriptors linked into the test.
func compileAPI(t *testing.T, src string) protoreflect.FileDescriptor {
	t.Helper()
	const path = "protobase/v1/protobase.proto"
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(func(p string) (protocompile.SearchResult, error) {
		if p == path {
			return protocompile.SearchResult{Source: io.NopCloser(strings.NewReader(src))}, nil
		}
		fd, err := protoregistry.GlobalFiles.FindFileByPath(p)
		if err != nil {
			return protocompile.SearchResult{}, err
		}
		return protocompile.SearchResult{Desc: fd}, nil
	}))}
	files, err := c.Compile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return files[0]
}
