package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// appendTestResponse encodes a SearchResponse answering n lookups.
func appendTestResponse(b []byte, n int) []byte {
	resp := &pb.SearchResponse{}
	for i := range n {
		resp.Results = append(resp.Results, &pb.ResultBatch{Query: uint64(i), Records: []*anypb.Any{{TypeUrl: "t", Value: []byte("v")}}})
		resp.Done = append(resp.Done, &pb.QueryDone{Query: uint64(i), Count: 1})
	}
	out, err := proto.Marshal(resp)
	if err != nil {
		panic(err)
	}
	return append(b, out...)
}

func testResult() *Result {
	return &Result{
		Experiment: "demo",
		Machine:    Machine{CPUs: 2, Model: "test cpu", Go: "go1.x", OS: "linux/amd64"},
		Started:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Rows: []Row{
			NewRow("a batch=1", map[string]any{"mode": "a", "batch": 1}, "op/s", []float64{10, 12, 11}, &Reference{Value: 9482, Source: "seed 000"}),
			NewRow("a batch=1000", map[string]any{"mode": "a", "batch": 1000}, "op/s", []float64{2e6, 2.1e6}, nil),
			NewRow("b batch=1", map[string]any{"mode": "b", "batch": 1}, "op/s", []float64{100}, nil),
			NewRow("b batch=1000", map[string]any{"mode": "b", "batch": 1000}, "op/s", []float64{3e6}, nil),
		},
		Chart: &Chart{Title: "demo", XLabel: "batch", YLabel: "op/s", X: "batch", Series: "mode"},
	}
}

// The JSON schema is stable: these keys, in this shape, with reference
// an object or null.
func TestJSONSchema(t *testing.T) {
	b, err := MarshalResult(testResult())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if got := keys(doc); !reflect.DeepEqual(got, []string{"experiment", "machine", "rows", "started"}) {
		t.Fatalf("top-level keys %v", got)
	}
	if got := keys(doc["machine"].(map[string]any)); !reflect.DeepEqual(got, []string{"cpus", "go", "model", "os"}) {
		t.Fatalf("machine keys %v", got)
	}
	if doc["started"] != "2026-01-02T03:04:05Z" {
		t.Fatalf("started %v", doc["started"])
	}
	rows := doc["rows"].([]any)
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	for i, r := range rows {
		row := r.(map[string]any)
		if got := keys(row); !reflect.DeepEqual(got, []string{"max", "median", "min", "name", "params", "reference", "runs", "unit"}) {
			t.Fatalf("row keys %v", got)
		}
		ref, isRef := row["reference"].(map[string]any)
		switch {
		case i == 0 && (!isRef || ref["value"] != 9482.0 || ref["source"] != "seed 000"):
			t.Fatalf("row 0 reference %v", row["reference"])
		case i > 0 && row["reference"] != nil:
			t.Fatalf("row %d reference %v, want null", i, row["reference"])
		}
	}
	row0 := rows[0].(map[string]any)
	if row0["median"] != 11.0 || row0["min"] != 10.0 || row0["max"] != 12.0 || row0["runs"] != 3.0 || row0["params"].(map[string]any)["batch"] != 1.0 {
		t.Fatalf("row 0 %v", row0)
	}
	// Notes appear only when there are some.
	res := testResult()
	res.Notes = []string{"n"}
	b, _ = MarshalResult(res)
	if !bytes.Contains(b, []byte(`"notes": [`)) {
		t.Fatal("notes missing")
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, testResult()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a batch=1 ", "11", "9,480", "0.00×", "2,050,000", "test cpu"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

// Charts are real PNG and SVG files, for bars and lines, on linear and
// log axes.
func TestDraw(t *testing.T) {
	dir := t.TempDir()
	for _, kind := range []ChartKind{Bars, Lines} {
		for _, ext := range []string{".png", ".svg"} {
			res := testResult()
			res.Chart.Kind = kind
			path := filepath.Join(dir, "c"+string(rune('0'+kind))+ext)
			if err := Draw(res, path); err != nil {
				t.Fatalf("%v %s: %v", kind, ext, err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if ext == ".png" {
				if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
					t.Fatalf("%s is not a PNG", path)
				}
				continue
			}
			checkSVG(t, b)
		}
	}
	if err := Draw(testResult(), filepath.Join(dir, "c.gif")); err == nil {
		t.Fatal("drew a .gif")
	}
	res := testResult()
	res.Chart.Kind, res.Chart.X = Lines, "mode"
	if err := Draw(res, filepath.Join(dir, "bad.svg")); err == nil {
		t.Fatal("line chart over a non-numeric X")
	}
}

// checkSVG parses b as XML and wants an <svg> root.
func checkSVG(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
}

func TestChartData(t *testing.T) {
	xs, series := chartData(testResult().Chart, testResult().Rows)
	if !reflect.DeepEqual(xs, []string{"1", "1000"}) {
		t.Fatalf("xs %v", xs)
	}
	var names []string
	for _, s := range series {
		names = append(names, s.name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b", publishedSeries}) {
		t.Fatalf("series %v", names)
	}
	if series[2].values["1"] != 9482 {
		t.Fatalf("published %v", series[2].values)
	}
}

func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	if err := CheckWritable(filepath.Join(dir, "x.json")); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left files behind: %v", entries)
	}
	if err := CheckWritable(filepath.Join(dir, "no", "x.json")); err == nil {
		t.Fatal("missing directory accepted")
	}
}

// When several series carry published figures at the same X (layout's
// four seed series per size), each gets its own published series instead
// of overwriting one another.
func TestChartDataPublishedPerSeries(t *testing.T) {
	ref := func(v float64) *Reference { return &Reference{Value: v} }
	rows := []Row{
		{Params: map[string]any{"x": 1, "s": "a"}, Median: 10, Reference: ref(1)},
		{Params: map[string]any{"x": 1, "s": "b"}, Median: 20, Reference: ref(2)},
		{Params: map[string]any{"x": 1, "s": "c"}, Median: 30},
	}
	_, series := chartData(&Chart{X: "x", Series: "s"}, rows)
	var names []string
	for _, s := range series {
		names = append(names, s.name)
	}
	if len(series) != 5 || series[3].name != "a (published)" || series[3].values["1"] != 1 || series[3].of != 0 ||
		series[4].name != "b (published)" || series[4].values["1"] != 2 || series[4].of != 1 {
		t.Fatalf("series %v", names)
	}
}

// Series that share the same published figures (batching's modes share
// the seed's one curve) get one published series, not one each.
func TestChartDataSharedPublished(t *testing.T) {
	ref := func(v float64) *Reference { return &Reference{Value: v} }
	rows := []Row{
		{Params: map[string]any{"x": 1, "s": "a"}, Median: 10, Reference: ref(1)},
		{Params: map[string]any{"x": 1, "s": "b"}, Median: 20, Reference: ref(1)},
	}
	_, series := chartData(&Chart{X: "x", Series: "s"}, rows)
	if len(series) != 3 || series[2].name != publishedSeries || series[2].values["1"] != 1 || series[2].of != -1 {
		t.Fatalf("series %+v", series)
	}
}
