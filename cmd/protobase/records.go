package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
)

// typeURLPrefix prefixes a record type's full name in its Any type URL.
const typeURLPrefix = "type.googleapis.com/"

// recordType turns JSON objects into records of one type, with the
// descriptors of the server's schema.
type recordType struct {
	name      string
	url       string
	md        protoreflect.MessageDescriptor
	unmarshal protojson.UnmarshalOptions
	limits    client.Limits // the server's write limits
}

// loadRecordType fetches the server's schema and finds the record type
// name (a full name; a type URL is accepted too).
func loadRecordType(ctx context.Context, c *client.Client, addr, name string) (*recordType, error) {
	name = strings.TrimPrefix(name, typeURLPrefix)
	resp, err := c.GetSchema(ctx)
	if err != nil {
		return nil, callError("get the schema", addr, err)
	}
	var known []string
	found := false
	for _, t := range resp.GetTypes() {
		known = append(known, t.GetName())
		found = found || t.GetName() == name
	}
	if !found {
		if scope := resp.GetKeyScope(); len(scope) > 0 {
			// A scoped key sees only its own types: an absent type may well
			// exist, so the schema is not what to blame.
			return nil, fmt.Errorf("record type %q is outside this API key's scope (%s): use a key whose scope includes it",
				name, strings.Join(scope, ", "))
		}
		if len(known) == 0 {
			return nil, fmt.Errorf("unknown record type %q: the server has no record types (apply a schema with \"protobase schema apply\")", name)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("unknown record type %q; the server's record types are:\n  %s", name, strings.Join(known, "\n  "))
	}
	files, err := protodesc.NewFiles(resp.GetDescriptors())
	if err != nil {
		return nil, fmt.Errorf("the server's schema descriptors: %w", err)
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		return nil, fmt.Errorf("record type %s is not in the server's schema descriptors: %w", name, err)
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("record type %s is not a message in the server's schema descriptors", name)
	}
	return &recordType{
		name:      name,
		url:       typeURLPrefix + name,
		md:        md,
		unmarshal: protojson.UnmarshalOptions{Resolver: dynamicpb.NewTypes(files)},
		limits:    client.LimitsOf(resp),
	}, nil
}

// encode parses one protojson object as a record and packs it.
func (t *recordType) encode(js []byte) (*anypb.Any, error) {
	m := dynamicpb.NewMessage(t.md)
	if err := t.unmarshal.Unmarshal(js, m); err != nil {
		return nil, err
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &anypb.Any{TypeUrl: t.url, Value: b}, nil
}

// input is where a write command reads its JSON lines.
type input struct {
	r    io.Reader
	name string // "stdin" or the file's path, for messages
	size int64  // length in bytes when known, else 0
	file *os.File
}

// openInput opens path, or stdin for "" and "-".
func openInput(path string, stdin io.Reader) (*input, error) {
	if path == "" || path == "-" {
		return &input{r: stdin, name: "stdin"}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	in := &input{r: f, name: path, file: f}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		in.size = fi.Size()
	}
	return in, nil
}

func (in *input) Close() error {
	if in.file != nil {
		return in.file.Close()
	}
	return nil
}

// lineReader reads lines of any length. The line returned (with its
// newline, if any) is valid until the next call.
type lineReader struct {
	br  *bufio.Reader
	buf []byte
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 1<<20)}
}

// next returns the next line, or io.EOF after the last.
func (r *lineReader) next() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.buf = append(r.buf[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.br.ReadSlice('\n')
			r.buf = append(r.buf, line...)
		}
		line = r.buf
	}
	if errors.Is(err, io.EOF) && len(line) > 0 {
		// The last line has no newline.
		err = nil
	}
	return line, err
}

// lineMap maps the ordinal of a record sent (0-based, in input order) to
// its input line (1-based). Records are on consecutive lines but for blank
// lines, so it keeps only the points where the two stop moving together.
type lineMap struct {
	n     uint64 // records added
	jumps []lineJump
}

type lineJump struct{ ord, line uint64 }

// add records that the next record is on line.
func (m *lineMap) add(line uint64) {
	if k := len(m.jumps); k == 0 || m.jumps[k-1].line+(m.n-m.jumps[k-1].ord) != line {
		m.jumps = append(m.jumps, lineJump{m.n, line})
	}
	m.n++
}

// line returns the line of record ord, if it was added.
func (m *lineMap) line(ord uint64) (uint64, bool) {
	if ord >= m.n {
		return 0, false
	}
	i := sort.Search(len(m.jumps), func(i int) bool { return m.jumps[i].ord > ord }) - 1
	j := m.jumps[i]
	return j.line + (ord - j.ord), true
}
