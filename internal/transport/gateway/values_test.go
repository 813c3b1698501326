package gateway

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/transport/schemajson"
)

func readAll(body string, max int) ([]string, error) {
	vr := newValueReader(strings.NewReader(body), max)
	var out []string
	for {
		v, err := vr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, string(v))
	}
}

func TestValueReader(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string
		err        string
	}{
		{"ndjson", "{\"a\":1}\n{\"b\":[2,{}]}\n", []string{`{"a":1}`, `{"b":[2,{}]}`}, ""},
		{"crlf and blank lines", "\r\n{}\r\n\r\n{ }\r\n", []string{`{}`, `{ }`}, ""},
		{"pretty-printed", "{\n  \"a\": {\n    \"b\": 1\n  }\n}", []string{"{\n  \"a\": {\n    \"b\": 1\n  }\n}"}, ""},
		{"concatenated", `{}{"x":"y"}`, []string{`{}`, `{"x":"y"}`}, ""},
		{"braces in strings", `{"s":"}{\"}\\"}` + "\n{}", []string{`{"s":"}{\"}\\"}`, `{}`}, ""},
		{"empty body", "", nil, ""},
		{"only whitespace", " \n\t\r ", nil, ""},
		{"not an object", `[{}]`, nil, "want a JSON object"},
		{"garbage after", "{}\nnull", []string{`{}`}, "want a JSON object"},
		{"truncated", `{"a": [1, 2`, nil, "body ends inside the JSON object"},
		{"unterminated string", `{"a": "}`, nil, "body ends inside"},
		{"too large", `{"a": "` + strings.Repeat("x", 100) + `"}`, nil, "larger than the limit of 64 bytes"},
		{"at the limit", `{"a":"` + strings.Repeat("x", 56) + `"}`, []string{`{"a":"` + strings.Repeat("x", 56) + `"}`}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(tc.body, 64)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("values %q, want %q", got, tc.want)
			}
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// FuzzValueReader: any body splits without panics into objects that are
// bounded, start with '{', and appear in order in the body; for a body
// of JSON objects joined by newlines, the split gives those objects back.
func FuzzValueReader(f *testing.F) {
	for _, s := range []string{"{}\n{}", `{"a":"}\"{"}`, "{[}]}", `{"a":1`, "\xff{", "{\"\\", "  {}  x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		vr := newValueReader(bytes.NewReader(body), 256)
		rest := body
		for range len(body) + 1 {
			v, err := vr.next()
			if err != nil {
				return
			}
			if len(v) > 256 || v[0] != '{' {
				t.Fatalf("value %q", v)
			}
			i := bytes.Index(rest, v)
			if i < 0 || len(bytes.TrimLeft(rest[:i], " \t\r\n")) != 0 {
				t.Fatalf("value %q is not next in the body", v)
			}
			rest = rest[i+len(v):]
		}
		t.Fatal("more values than bytes")
	})
}

// FuzzWriteBody: a hostile write body decodes to batches or to errors with
// a client's code, never a panic or another code.
func FuzzWriteBody(f *testing.F) {
	for _, s := range []string{
		`{"records": [{"@type": "type.googleapis.com/protobase.v1.Index", "name": "a", "fields": ["x"], "unique": true}]}`,
		`{"records": [{"@type": "type.googleapis.com/shop.Nope", "id": "1"}]}`,
		`{"records": [{"@type": "type.googleapis.com/protobase.v1.Index", "state": "INDEX_STATE_NOPE"}]}`,
		`{"records": {"a": 1}}` + "\n" + `{"records": null, "records": []}`,
		`{"op": "WRITE_OP_INSERT", "ack": "yes", "records": []}`,
	} {
		f.Add([]byte(s))
	}
	c := newCodec(schemajson.New(nil), 1024, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		d := c.NewDecoder(bytes.NewReader(body)).(*decoder)
		for range 64 {
			var err error
			if len(body)%2 == 0 {
				err = d.decodeBatch(new(pb.WriteRequest))
			} else {
				err = d.decodeBatch(new(pb.WriteStreamRequest))
			}
			if err == nil {
				continue
			}
			if errors.Is(err, io.EOF) {
				return
			}
			var e *apierror.Error
			if !errors.As(err, &e) || (e.Code != apierror.InvalidArgument && e.Code != apierror.ResourceExhausted) {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
	})
}
