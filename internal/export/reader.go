package export

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Reader reads one export file record by record. It is not safe for
// concurrent use. Invariant: pending holds the records of the current
// binary chunk not yet returned; types holds the schema's type names.
type Reader struct {
	format Format
	schema *pb.ExportSchema
	types  map[string]bool
	n      uint64 // records returned
	ended  bool   // the end was read and matched n
	ver    uint64 // the version of the record returned last, 0 if none

	// binary; pendingVers is parallel to pending, or empty
	br          *countingReader
	pending     []*anypb.Any
	pendingVers []uint64

	// JSON
	lines *bufio.Scanner
	line  int
	codec Codec
}

// countingReader counts the bytes read, for error offsets.
type countingReader struct {
	r   *bufio.Reader
	off int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.off += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.off++
	}
	return b, err
}

// NewReader reads the header and schema of a file; the format is told by
// its first byte. newCodec is used (and needed) for JSON files only.
func NewReader(r io.Reader, newCodec NewCodec) (*Reader, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	first, err := br.Peek(1)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("export file is empty")
		}
		return nil, fmt.Errorf("read export file: %w", err)
	}
	if first[0] == '{' {
		return newJSONReader(br, newCodec)
	}
	return newBinaryReader(br)
}

func newBinaryReader(br *bufio.Reader) (*Reader, error) {
	cr := &countingReader{r: br}
	head := make([]byte, len(Magic))
	if _, err := io.ReadFull(cr, head); err != nil || string(head) != Magic {
		return nil, fmt.Errorf("not an export file: it starts with neither %q nor a JSON line", Magic)
	}
	v, err := binary.ReadUvarint(cr)
	if err != nil {
		return nil, fmt.Errorf("export file header at offset %d: %w", cr.off, eofUnexpected(err))
	}
	if v != Version {
		return nil, fmt.Errorf("export file format version %d is not supported (this build reads version %d)", v, Version)
	}
	rd := &Reader{format: Binary, br: cr}
	off := cr.off
	chunk, err := rd.chunk()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("export file has no schema at offset %d: %w", off, io.ErrUnexpectedEOF)
		}
		return nil, err
	}
	s := chunk.GetSchema()
	if s == nil {
		return nil, fmt.Errorf("export file: the message at offset %d is not the schema", off)
	}
	return rd, rd.setSchema(s)
}

func (r *Reader) setSchema(s *pb.ExportSchema) error {
	r.schema = s
	r.types = make(map[string]bool, len(s.GetTypes()))
	for _, t := range s.GetTypes() {
		r.types[t] = true
	}
	return nil
}

// chunk reads the next binary message; io.EOF at a clean end.
func (r *Reader) chunk() (*pb.ExportChunk, error) {
	off := r.br.off
	c := &pb.ExportChunk{}
	err := protodelim.UnmarshalOptions{MaxSize: MaxMessageBytes}.UnmarshalFrom(r.br, c)
	if errors.Is(err, io.EOF) && r.br.off == off {
		return nil, io.EOF
	}
	if err != nil {
		return nil, fmt.Errorf("export file: message at offset %d: %w", off, eofUnexpected(err))
	}
	return c, nil
}

func eofUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("truncated: %w", io.ErrUnexpectedEOF)
	}
	return err
}

// Schema is the file's schema.
func (r *Reader) Schema() *pb.ExportSchema { return r.schema }

// Format is the file's format.
func (r *Reader) Format() Format { return r.format }

// Next returns the next record, or io.EOF after the last.
func (r *Reader) Next() (*anypb.Any, error) {
	if r.ended {
		return nil, io.EOF
	}
	if r.format == JSON {
		return r.nextJSON()
	}
	for len(r.pending) == 0 {
		off := r.br.off
		c, err := r.chunk()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("export file is truncated: no end after %d records at offset %d: %w", r.n, off, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return nil, err
		}
		if end := c.GetEnd(); end != nil {
			if err := r.end(end); err != nil {
				return nil, fmt.Errorf("export file: message at offset %d: %w", off, err)
			}
			if _, err := r.br.ReadByte(); !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("export file: data after the end at offset %d", r.br.off)
			}
			return nil, io.EOF
		}
		recs := c.GetRecords()
		if recs == nil {
			return nil, fmt.Errorf("export file: the message at offset %d is not a batch of records", off)
		}
		for i, a := range recs.GetRecords() {
			if err := r.check(a.GetTypeUrl()); err != nil {
				return nil, fmt.Errorf("export file: message at offset %d, record %d: %w", off, i, err)
			}
		}
		if v := len(recs.GetVersions()); v != 0 && v != len(recs.GetRecords()) {
			return nil, fmt.Errorf("export file: message at offset %d: %d versions for %d records", off, v, len(recs.GetRecords()))
		}
		r.pending, r.pendingVers = recs.GetRecords(), recs.GetVersions()
	}
	a := r.pending[0]
	r.pending = r.pending[1:]
	r.ver = 0
	if len(r.pendingVers) > 0 {
		r.ver, r.pendingVers = r.pendingVers[0], r.pendingVers[1:]
	}
	r.n++
	return a, nil
}

// Version is the version of the record Next returned last, as the file
// holds it (an export that asked for versions), or 0 when it holds none.
func (r *Reader) Version() uint64 { return r.ver }

// end checks the end's count against the records read.
func (r *Reader) end(end *pb.ExportEnd) error {
	if end.GetRecords() != r.n {
		return fmt.Errorf("the end counts %d records, the file holds %d", end.GetRecords(), r.n)
	}
	r.ended = true
	return nil
}

func (r *Reader) check(url string) error {
	name := typeName(url)
	if url != TypeURLPrefix+name || !r.types[name] {
		return fmt.Errorf("type %q is not one of the file's schema types", url)
	}
	return nil
}

func newJSONReader(br *bufio.Reader, newCodec NewCodec) (*Reader, error) {
	if newCodec == nil {
		return nil, errors.New("export: reading a JSON file needs a codec")
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), MaxMessageBytes)
	rd := &Reader{format: JSON, lines: sc}
	line, err := rd.nextLine()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("export file line 1: no schema line")
		}
		return nil, err
	}
	var head struct {
		Format  string          `json:"format"`
		Version int             `json:"version"`
		Schema  json.RawMessage `json:"schema"`
	}
	if err := strictJSON(line, &head); err != nil {
		return nil, fmt.Errorf("export file line 1: not a schema line: %w", err)
	}
	if head.Format != jsonFormat {
		return nil, fmt.Errorf("export file line 1: format is %q, not %q", head.Format, jsonFormat)
	}
	if head.Version != Version {
		return nil, fmt.Errorf("export file line 1: format version %d is not supported (this build reads version %d)", head.Version, Version)
	}
	s := &pb.ExportSchema{}
	if err := protojson.Unmarshal(head.Schema, s); err != nil {
		return nil, fmt.Errorf("export file line 1: schema: %w", err)
	}
	if s.GetDescriptors() == nil {
		return nil, errors.New("export file line 1: the schema has no descriptors to read records with")
	}
	if rd.codec, err = newCodec(s); err != nil {
		return nil, fmt.Errorf("export file line 1: schema: %w", err)
	}
	return rd, rd.setSchema(s)
}

// nextLine returns the next non-empty line; io.EOF at the end.
func (r *Reader) nextLine() ([]byte, error) {
	for r.lines.Scan() {
		r.line++
		if b := bytes.TrimSpace(r.lines.Bytes()); len(b) > 0 {
			return b, nil
		}
	}
	if err := r.lines.Err(); err != nil {
		return nil, fmt.Errorf("export file line %d: %w", r.line+1, err)
	}
	return nil, io.EOF
}

func (r *Reader) nextJSON() (*anypb.Any, error) {
	line, err := r.nextLine()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("export file is truncated: no end line after line %d: %w", r.line, io.ErrUnexpectedEOF)
	}
	if err != nil {
		return nil, err
	}
	var rec jsonLine
	if err := strictJSON(line, &rec); err != nil {
		return nil, fmt.Errorf("export file line %d: %w", r.line, err)
	}
	if rec.End != nil {
		if rec.Type != "" || rec.Record != nil || rec.Version != 0 {
			return nil, fmt.Errorf("export file line %d: an end line holds a record", r.line)
		}
		if err := r.end(rec.End); err != nil {
			return nil, fmt.Errorf("export file line %d: %w", r.line, err)
		}
		if _, err := r.nextLine(); !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("export file line %d: text after the end", r.line)
		}
		return nil, io.EOF
	}
	if !r.types[rec.Type] {
		return nil, fmt.Errorf("export file line %d: type %q is not one of the file's schema types", r.line, rec.Type)
	}
	if len(rec.Record) == 0 {
		return nil, fmt.Errorf("export file line %d: no record", r.line)
	}
	a, err := r.codec.FromJSON(rec.Type, rec.Record)
	if err != nil {
		return nil, fmt.Errorf("export file line %d: %w", r.line, err)
	}
	r.ver = rec.Version
	r.n++
	return a, nil
}

// strictJSON decodes one JSON object with no unknown fields and nothing
// after it.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("text after the JSON object")
	}
	return nil
}
