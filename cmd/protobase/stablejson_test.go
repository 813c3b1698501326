package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The CLI's JSON is in the form encoding/json writes, which does not
// change between builds (protojson's own spacing does, on purpose):
// schema get --format json indented by two spaces, records and watch
// lines compact.
func TestJSONOutputIsStable(t *testing.T) {
	addr := startServer(t).Addr()
	applyShop(t, addr)
	mustCLI(t, `{"id": 1, "email": "a@x", "name": "Ann"}`, "--addr", addr, "insert", "--type", "shop.User")

	schema := mustCLI(t, "", "--addr", addr, "schema", "get", "--format", "json").stdout
	var canon bytes.Buffer
	if err := json.Indent(&canon, []byte(schema), "", "  "); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(schema)); err != nil {
		t.Fatal(err)
	}
	canon.Reset()
	if err := json.Indent(&canon, compact.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	if schema != canon.String()+"\n" {
		t.Errorf("schema get --format json is not in the stable form:\n%q\nwant\n%q", schema, canon.String()+"\n")
	}

	rec := mustCLI(t, "", "--addr", addr, "get", "--type", "shop.User", "1").stdout
	if rec != `{"id":"1","name":"Ann","email":"a@x"}`+"\n" {
		t.Errorf("get printed %q", rec)
	}
}
