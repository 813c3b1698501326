// Package export owns the export file format: what `protobase export`
// writes and `protobase import` reads. A file holds one schema (the .proto
// sources and compiled descriptors the records were read under) and then
// records, in one of two encodings:
//
//   - binary (the default): the 8-byte magic "PBEXPORT", a uvarint format
//     version (1), then protodelim-framed (uvarint length, message)
//     protobase.v1.ExportChunk messages: exactly one schema chunk, first,
//     then record chunks. Records keep their stored bytes, so an import
//     writes back exactly what was exported.
//   - JSON lines: a first line {"format":"protobase-export","version":1,
//     "schema":{...}} (the ExportSchema in protobuf JSON), then one line
//     {"type":"pkg.T","record":{...}} per record, converted with the
//     schema of the file itself, so no server is needed to read it.
//
// An export that asks for versions holds each record's version beside it:
// ExportRecords.versions, parallel to its records (binary), or a "version"
// member of the record's line, a string as protobuf JSON writes 64-bit
// integers (JSON). A reader returns it (Reader.Version); an import does
// not use it, its writes get versions of their own.
//
// Reading treats the file as hostile: messages and lines are bounded
// (MaxMessageBytes), every record must be of a type the schema lists, and
// every error names the byte offset (binary) or line (JSON) it found.
package export

import (
	"fmt"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Format is an encoding of an export file.
type Format int

// The formats.
const (
	Binary Format = iota
	JSON
)

// ParseFormat parses a --format value ("binary" or "json").
func ParseFormat(s string) (Format, error) {
	switch s {
	case "binary", "":
		return Binary, nil
	case "json":
		return JSON, nil
	}
	return 0, fmt.Errorf("unknown export format %q (want binary or json)", s)
}

func (f Format) String() string {
	if f == JSON {
		return "json"
	}
	return "binary"
}

// Magic starts every binary export file.
const Magic = "PBEXPORT"

// Version is the format version this package writes and reads.
const Version = 1

// jsonFormat is the "format" of a JSON file's first line.
const jsonFormat = "protobase-export"

// MaxMessageBytes bounds one binary message or one JSON line a Reader
// accepts: larger is an error, not an allocation.
const MaxMessageBytes = 64 << 20

// TypeURLPrefix starts the type URL of every record.
const TypeURLPrefix = "type.googleapis.com/"

// Codec converts records to and from protobuf JSON under one schema; the
// JSON format needs one (client.Types is one).
type Codec interface {
	JSON(rec *anypb.Any) ([]byte, error)
	FromJSON(typeName string, js []byte) (*anypb.Any, error)
}

// NewCodec builds the Codec of a file's schema.
type NewCodec func(*pb.ExportSchema) (Codec, error)
