package schema

import (
	"context"
	"fmt"
	"testing"
)

// chainFiles is a schema of n small files, each importing the one before
// it and holding one record type whose field uses the previous file's
// message: the shape that took 4.4 s to compile at 3,000 files.
func chainFiles(n int) map[string]string {
	files := make(map[string]string, n)
	for i := range n {
		src := "syntax = \"proto3\";\npackage chain;\nimport \"protobase/v1/options.proto\";\n"
		if i > 0 {
			src += fmt.Sprintf("import \"chain/f%d.proto\";\n", i-1)
		}
		src += fmt.Sprintf("message M%d {\n  option (protobase.v1.record) = { primary_key: \"id\" index: { fields: \"name\" } };\n  int64 id = 1;\n  string name = 2;\n", i)
		if i > 0 {
			src += fmt.Sprintf("  M%d prev = 3;\n", i-1)
		}
		src += "}\n"
		files[fmt.Sprintf("chain/f%d.proto", i)] = src
	}
	return files
}

// BenchmarkCompileChain compiles chains of 300, 1,000 and 3,000 files; the
// time per file should not grow with the number of files.
func BenchmarkCompileChain(b *testing.B) {
	for _, n := range []int{300, 1000, 3000} {
		files := chainFiles(n)
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Compile(context.Background(), files); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/file")
		})
	}
}

// BenchmarkPlanChain plans a change over the state holding a chain of 300,
// 1,000 and 3,000 files: a field added to the last file (no other type
// reaches it) or to the first (every type reaches it and reports it).
// Compile and compare, per file, should not grow with the number of files.
func BenchmarkPlanChain(b *testing.B) {
	for _, end := range []string{"last", "first"} {
		for _, n := range []int{300, 1000, 3000} {
			files := chainFiles(n)
			old, err := Plan(context.Background(), nil, PlanRequest{Files: files}, nil)
			if err != nil {
				b.Fatal(err)
			}
			next := make(map[string]string, n)
			for k, v := range files {
				next[k] = v
			}
			changed, wantTypes := fmt.Sprintf("chain/f%d.proto", n-1), 1
			if end == "first" {
				changed, wantTypes = "chain/f0.proto", n
			}
			next[changed] = next[changed][:len(next[changed])-2] + "  string extra = 9;\n}\n"
			counts := func(*RecordType) (uint64, error) { return 1, nil }
			b.Run(fmt.Sprintf("%s/files=%d", end, n), func(b *testing.B) {
				for b.Loop() {
					r, err := Plan(context.Background(), old.State, PlanRequest{Files: next}, counts)
					if err != nil || len(r.Plan.TypesChanged) != wantTypes {
						b.Fatalf("plan: %v, %d types changed", err, len(r.Plan.TypesChanged))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/file")
			})
		}
	}
}

// BenchmarkDecodeChain loads a stored state of a chain of 300, 1,000 and
// 3,000 files, as the server does at start: from its stored descriptors,
// and (Compile) from its sources as before they were stored.
func BenchmarkDecodeChain(b *testing.B) {
	for _, n := range []int{300, 1000, 3000} {
		r, err := Plan(context.Background(), nil, PlanRequest{Files: chainFiles(n)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		enc, err := r.State.Encode()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Decode(context.Background(), enc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(enc)), "state-bytes")
		})
	}
}
