package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// stableJSON encodes m as protobuf JSON (field names, enum names, 64-bit
// integers as strings, as opts says) in bytes that do not change from one
// build to the next: protojson puts spaces at random into its output, the
// choice fixed per binary, so that nothing depends on its bytes. The CLI's
// output is for scripts, which compare and hash it: it is re-encoded by
// encoding/json, compact when indent is "", else one member a line
// indented by indent.
func stableJSON(opts protojson.MarshalOptions, m proto.Message, indent string) ([]byte, error) {
	js, err := opts.Marshal(m)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if indent == "" {
		err = json.Compact(&b, js)
	} else {
		err = json.Indent(&b, js, "", indent)
	}
	if err != nil {
		return nil, fmt.Errorf("re-encode JSON: %w", err)
	}
	return b.Bytes(), nil
}
