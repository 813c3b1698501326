package export_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/export"
)

// The files here hold google.protobuf.Duration records: a schema that
// needs no compiler, built from the descriptor linked into this binary.
const durationType = "google.protobuf.Duration"

func testSchema() *pb.ExportSchema {
	return &pb.ExportSchema{
		Version: 3,
		Types:   []string{durationType},
		Descriptors: &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{
			protodesc.ToFileDescriptorProto(durationpb.File_google_protobuf_duration_proto),
		}},
	}
}

func codec(s *pb.ExportSchema) (export.Codec, error) {
	resp := &pb.GetSchemaResponse{Version: s.GetVersion(), Descriptors: s.GetDescriptors()}
	for _, t := range s.GetTypes() {
		resp.Types = append(resp.Types, &pb.RecordType{Name: t})
	}
	return client.NewTypes(resp)
}

func records(n int) []*anypb.Any {
	out := make([]*anypb.Any, n)
	for i := range out {
		b, _ := proto.Marshal(durationpb.New(time.Duration(i+1) * time.Second))
		out[i] = &anypb.Any{TypeUrl: export.TypeURLPrefix + durationType, Value: b}
	}
	return out
}

func file(t testing.TB, format export.Format, recs []*anypb.Any, batch int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := export.NewWriter(&buf, format, testSchema(), codec)
	if err != nil {
		t.Fatal(err)
	}
	for len(recs) > 0 {
		n := min(batch, len(recs))
		if err := w.Records(recs[:n], nil); err != nil {
			t.Fatal(err)
		}
		recs = recs[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readAll reads every record of a file, or the first error.
func readAll(b []byte) (*pb.ExportSchema, []*anypb.Any, error) {
	r, err := export.NewReader(bytes.NewReader(b), codec)
	if err != nil {
		return nil, nil, err
	}
	var out []*anypb.Any
	for {
		a, err := r.Next()
		if errors.Is(err, io.EOF) {
			return r.Schema(), out, nil
		}
		if err != nil {
			return r.Schema(), out, err
		}
		out = append(out, a)
	}
}

func TestRoundTrip(t *testing.T) {
	want := records(25)
	for _, f := range []export.Format{export.Binary, export.JSON} {
		s, got, err := readAll(file(t, f, want, 10))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if s.GetVersion() != 3 || len(s.GetTypes()) != 1 {
			t.Fatalf("%s: schema %v", f, s)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, want %d", f, len(got), len(want))
		}
		for i := range want {
			if !proto.Equal(got[i], want[i]) {
				t.Fatalf("%s: record %d is %v, want %v", f, i, got[i], want[i])
			}
		}
	}
	// An empty export is a valid file.
	if _, got, err := readAll(file(t, export.Binary, nil, 1)); err != nil || len(got) != 0 {
		t.Fatalf("empty file: %d records, %v", len(got), err)
	}
}

// A file written with versions holds each record's version, which the
// reader returns beside the record in both formats; a file without them
// reads version 0. Versions that do not match their records are refused.
func TestVersions(t *testing.T) {
	recs := records(5)
	vers := []uint64{7, 7, 9, 1 << 60, 12}
	for _, f := range []export.Format{export.Binary, export.JSON} {
		for _, with := range []bool{false, true} {
			var buf bytes.Buffer
			w, err := export.NewWriter(&buf, f, testSchema(), codec)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(recs); i += 2 {
				var v []uint64
				if with {
					v = vers[i:min(i+2, len(vers))]
				}
				if err := w.Records(recs[i:min(i+2, len(recs))], v); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if f == export.JSON && with && !strings.Contains(buf.String(), `{"type":"google.protobuf.Duration","version":"1152921504606846976","record":"4s"}`) {
				t.Fatalf("JSON file with versions:\n%s", buf.String())
			}
			r, err := export.NewReader(bytes.NewReader(buf.Bytes()), codec)
			if err != nil {
				t.Fatal(err)
			}
			for i := range recs {
				a, err := r.Next()
				if err != nil || !proto.Equal(a, recs[i]) {
					t.Fatalf("%s: record %d: %v, %v", f, i, a, err)
				}
				if want := map[bool]uint64{true: vers[i]}[with]; r.Version() != want {
					t.Fatalf("%s, versions %v: record %d at version %d, want %d", f, with, i, r.Version(), want)
				}
			}
			if _, err := r.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("%s: after the last record: %v", f, err)
			}
		}
	}

	w, _ := export.NewWriter(&bytes.Buffer{}, export.Binary, testSchema(), codec)
	if err := w.Records(recs, vers[:2]); err == nil {
		t.Fatal("the writer took 2 versions for 5 records")
	}
	// A binary chunk whose versions are not parallel to its records, and a
	// JSON end line with a version.
	var buf bytes.Buffer
	buf.Write(file(t, export.Binary, nil, 1))
	buf.Truncate(afterSchema(buf.Bytes()))
	chunk := &pb.ExportChunk{Chunk: &pb.ExportChunk_Records{Records: &pb.ExportRecords{Records: recs[:2], Versions: vers[:1]}}}
	if _, err := protodelim.MarshalTo(&buf, chunk); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAll(buf.Bytes()); err == nil || !strings.Contains(err.Error(), "1 versions for 2 records") {
		t.Fatalf("mismatched versions: %v", err)
	}
	lines := strings.SplitAfter(string(file(t, export.JSON, nil, 1)), "\n")
	if _, _, err := readAll([]byte(lines[0] + `{"version":"3","end":{"records":0}}` + "\n")); err == nil || !strings.Contains(err.Error(), "an end line holds a record") {
		t.Fatalf("an end line with a version: %v", err)
	}
}

// Every cut of a file short of its end is an error, never a shorter file.
func TestTruncated(t *testing.T) {
	for _, f := range []export.Format{export.Binary, export.JSON} {
		full := file(t, f, records(7), 3)
		cuts := len(full)
		if f == export.JSON {
			cuts-- // all but the last newline is a whole file
		}
		for n := range cuts {
			_, _, err := readAll(full[:n])
			if err == nil {
				t.Fatalf("%s: the file cut at %d of %d bytes reads without error", f, n, len(full))
			}
		}
	}
	_, _, err := readAll(file(t, export.Binary, records(7), 3)[:40])
	if err == nil || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("truncated binary file: %v", err)
	}
}

func TestMalformed(t *testing.T) {
	bin := file(t, export.Binary, records(3), 2)
	js := file(t, export.JSON, records(3), 2)
	lines := strings.SplitAfter(string(js), "\n")
	unknown := func() []byte {
		var buf bytes.Buffer
		w, _ := export.NewWriter(&buf, export.Binary, testSchema(), codec)
		_ = w.Records([]*anypb.Any{{TypeUrl: "type.googleapis.com/shop.Other", Value: []byte{8, 1}}}, nil)
		_ = w.Close()
		return buf.Bytes()
	}()
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"bad magic", append([]byte("PBEXPORX"), bin[8:]...), "not an export file"},
		{"garbage", []byte("\x00\x01garbage"), "not an export file"},
		{"future version", append([]byte("PBEXPORT\x02"), bin[9:]...), "format version 2 is not supported"},
		{"huge length", append([]byte("PBEXPORT\x01"), 0xff, 0xff, 0xff, 0xff, 0x0f), "offset 9"},
		{"records first", append([]byte("PBEXPORT\x01"), bin[afterSchema(bin):]...), "is not the schema"},
		{"unknown type", unknown, `"type.googleapis.com/shop.Other" is not one of the file's schema types`},
		{"data after the end", append(bytes.Clone(bin), 0), "data after the end"},
		{"json garbage line", []byte(lines[0] + "not json\n" + strings.Join(lines[1:], "")), "line 2"},
		{"json unknown type", []byte(lines[0] + `{"type":"shop.Other","record":{}}` + "\n"), `line 2: type "shop.Other"`},
		{"json bad record", []byte(lines[0] + `{"type":"google.protobuf.Duration","record":{"x":1}}` + "\n"), "line 2"},
		{"json unknown key", []byte(lines[0] + `{"type":"google.protobuf.Duration","record":"1s","extra":1}` + "\n"), "line 2"},
		{"json wrong count", []byte(strings.Join(lines[:2], "") + `{"end":{"records":5}}` + "\n"), "the end counts 5 records, the file holds 1"},
		{"json text after end", append(bytes.Clone(js), "{}\n"...), "text after the end"},
		{"json schema without descriptors", []byte(`{"format":"protobase-export","version":1,"schema":{}}` + "\n"), "no descriptors"},
		{"json not a schema line", []byte(`{"format":"other","version":1}` + "\n"), `format is "other"`},
		{"json schema with another Duration", []byte(`{"format":"protobase-export","version":1,"schema":{"types":["google.protobuf.Duration"],` +
			`"descriptors":{"file":[{"name":"d.proto","package":"google.protobuf","messageType":[{"name":"Duration"}]}]}}}` + "\n" +
			`{"type":"google.protobuf.Duration","record":"0s"}` + "\n"), "unlike the well-known type"},
		{"json huge line", []byte(lines[0] + `{"type":"` + strings.Repeat("x", export.MaxMessageBytes) + "\"}\n"), "line 2"},
	}
	for _, c := range cases {
		_, _, err := readAll(c.file)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// afterSchema is the offset of the message after a binary file's schema.
func afterSchema(bin []byte) int {
	size, n := protowire.ConsumeVarint(bin[9:])
	return 9 + n + int(size)
}

func TestParseFormat(t *testing.T) {
	for s, want := range map[string]export.Format{"binary": export.Binary, "json": export.JSON} {
		if f, err := export.ParseFormat(s); err != nil || f != want {
			t.Fatalf("ParseFormat(%q) = %v, %v", s, f, err)
		}
	}
	if _, err := export.ParseFormat("xml"); err == nil {
		t.Fatal("ParseFormat(xml) accepted it")
	}
}

// FuzzReader: a reader never panics or allocates past its bounds on any
// input, and a file it reads whole re-encodes to a file it reads the same.
func FuzzReader(f *testing.F) {
	f.Add(file(f, export.Binary, records(3), 2))
	f.Add(file(f, export.JSON, records(3), 2))
	for _, format := range []export.Format{export.Binary, export.JSON} {
		var buf bytes.Buffer
		w, _ := export.NewWriter(&buf, format, testSchema(), codec)
		_ = w.Records(records(2), []uint64{5, 6})
		_ = w.Close()
		f.Add(buf.Bytes())
	}
	f.Add([]byte("PBEXPORT\x01"))
	f.Add([]byte("{}\n"))
	f.Add([]byte(`{"formAt":"protobase-export","version":1,"sChemA":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, recs, err := readAll(b)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		w, err := export.NewWriter(&buf, export.Binary, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Records(recs, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		_, again, err := readAll(buf.Bytes())
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-encoded file: %d records of %d, %v", len(again), len(recs), err)
		}
	})
}
