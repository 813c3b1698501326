package export

import (
	"bufio"
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

// Writer writes one export file. It is not safe for concurrent use.
type Writer struct {
	w      *bufio.Writer
	format Format
	codec  Codec // JSON only
	n      uint64
}

// NewWriter writes the header and schema of a file to w. newCodec is used
// (and needed) for the JSON format only.
func NewWriter(w io.Writer, format Format, schema *pb.ExportSchema, newCodec NewCodec) (*Writer, error) {
	ew := &Writer{w: bufio.NewWriterSize(w, 256<<10), format: format}
	if format == JSON {
		if newCodec == nil {
			return nil, errors.New("export: the JSON format needs a codec")
		}
		codec, err := newCodec(schema)
		if err != nil {
			return nil, fmt.Errorf("export: schema: %w", err)
		}
		ew.codec = codec
		js, err := protojson.Marshal(schema)
		if err != nil {
			return nil, fmt.Errorf("export: schema to JSON: %w", err)
		}
		line, err := json.Marshal(struct {
			Format  string          `json:"format"`
			Version int             `json:"version"`
			Schema  json.RawMessage `json:"schema"`
		}{jsonFormat, Version, js})
		if err != nil {
			return nil, fmt.Errorf("export: schema line: %w", err)
		}
		return ew, ew.line(line)
	}
	head := binary.AppendUvarint([]byte(Magic), Version)
	if _, err := ew.w.Write(head); err != nil {
		return nil, fmt.Errorf("export: write header: %w", err)
	}
	if _, err := protodelim.MarshalTo(ew.w, &pb.ExportChunk{Chunk: &pb.ExportChunk_Schema{Schema: schema}}); err != nil {
		return nil, fmt.Errorf("export: write schema: %w", err)
	}
	return ew, nil
}

func (w *Writer) line(b []byte) error {
	if _, err := w.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("export: write: %w", err)
	}
	return nil
}

// Records appends a batch of records, with their versions when versions
// is not empty (then it is parallel to recs).
func (w *Writer) Records(recs []*anypb.Any, versions []uint64) error {
	if len(versions) != 0 && len(versions) != len(recs) {
		return fmt.Errorf("export: %d versions for %d records", len(versions), len(recs))
	}
	if w.format == Binary {
		chunk := &pb.ExportChunk{Chunk: &pb.ExportChunk_Records{Records: &pb.ExportRecords{Records: recs, Versions: versions}}}
		if _, err := protodelim.MarshalTo(w.w, chunk); err != nil {
			return fmt.Errorf("export: write records: %w", err)
		}
		w.n += uint64(len(recs))
		return nil
	}
	for i, r := range recs {
		js, err := w.codec.JSON(r)
		if err != nil {
			return fmt.Errorf("export: record %d to JSON: %w", w.n, err)
		}
		rl := jsonLine{Type: typeName(r.GetTypeUrl()), Record: js}
		if len(versions) != 0 {
			rl.Version = versions[i]
		}
		line, err := json.Marshal(rl)
		if err != nil {
			return fmt.Errorf("export: record %d: %w", w.n, err)
		}
		if err := w.line(line); err != nil {
			return err
		}
		w.n++
	}
	return nil
}

// Count is how many records were written.
func (w *Writer) Count() uint64 { return w.n }

// Close writes the end (the record count, whose absence tells a reader
// the file was cut short) and flushes. It does not close the underlying
// writer.
func (w *Writer) Close() error {
	if w.format == Binary {
		end := &pb.ExportChunk{Chunk: &pb.ExportChunk_End{End: &pb.ExportEnd{Records: w.n}}}
		if _, err := protodelim.MarshalTo(w.w, end); err != nil {
			return fmt.Errorf("export: write end: %w", err)
		}
	} else {
		line, err := json.Marshal(jsonEnd{End: &pb.ExportEnd{Records: w.n}})
		if err != nil {
			return err
		}
		if err := w.line(line); err != nil {
			return err
		}
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("export: write: %w", err)
	}
	return nil
}

// typeName is the full name in a type URL (after its last '/').
func typeName(url string) string {
	for i := len(url) - 1; i >= 0; i-- {
		if url[i] == '/' {
			return url[i+1:]
		}
	}
	return url
}

// jsonLine is a record line of a JSON file; the last line has only End.
// Version, written when the export asked for versions, is a string, as
// protobuf JSON writes a 64-bit integer.
type jsonLine struct {
	Type    string          `json:"type,omitempty"`
	Version uint64          `json:"version,omitempty,string"`
	Record  json.RawMessage `json:"record,omitempty"`
	End     *pb.ExportEnd   `json:"end,omitempty"`
}

// jsonEnd is the last line of a JSON file.
type jsonEnd struct {
	End *pb.ExportEnd `json:"end"`
}
