// Package bench is the Protobase lab's harness and kit: what the
// experiments behind `protobase-bench` share. Each experiment is a package
// of its own below bench/ (batching, patterns, ingest, transports, layout,
// fetch, watch) that registers itself when imported; bench/experiments imports
// them all, and cmd/protobase-bench imports that (see docs/benchmarks.md).
//
// The harness runs an experiment against a real server over loopback TCP
// (StartTarget: an embedded lab server in a fresh directory, or the --addr
// server), measures workloads after a warm-up for several runs (Measure),
// and reports medians and spreads beside the seeds' published figures as
// tables, JSON and charts (NewRow, WriteTable, WriteJSON, Draw), and as the
// report a newcomer reads (WriteReportDir: report.md and the self-contained
// report.html, opening with what each experiment asks and answered, with
// suspicious orderings flagged by Flags). MeasureOp
// is its loop for client-side costs (ns/op, B/op, allocs/op), so that the
// protobase binary does not link the testing package.
//
// The kit is what several experiments send: the lab's record types
// (ItemSchema, embedded from items.proto) and their encodings
// (AppendItem, AppendWriteRecords, LookupQuery, Target.LoadItems),
// requests encoded once and sent as they are (Frame, FrameCycle,
// CallCodec), the search workloads of batching and patterns
// (AlternateSearch, SendAllSearch, SinkSearch) and the insert loop of
// ingest and layout (InsertStream).
//
// Every experiment talks to the server through its public gRPC API (and
// the lab API, protobase.lab.v1, for what needs the server's cooperation),
// never through the engine, so that it measures what a client sees.
//
// # Adding an experiment
//
//  1. Create a package bench/NAME with a type implementing Experiment:
//     Name and Describe, Flags to bind its own flags into its fields (they
//     appear on `protobase-bench NAME`), and Run. A record type it needs
//     beyond the kit's goes in a .proto file of the package, embedded with
//     //go:embed and added with Target.EnsureSchema.
//  2. In Run, get a server with env.Target, load data, then for each
//     configuration build a Workload and call env.Measure: it warms up,
//     repeats the workload env.Runs times and returns the per-run rates.
//     Turn them into rows with NewRow, attaching a Reference where a seed
//     published a figure. Honour env.Quick (fewer configurations, smaller
//     data) so that `--quick` stays under a minute for all experiments
//     together.
//  3. Return a Result with a Chart describing how to draw the rows.
//  4. Register a constructor in an init function of the package:
//     func init() { bench.Register(func() bench.Experiment { return new(Experiment) }) }
//     and add the package's import to bench/experiments. Experiments are
//     listed (and `bench all` runs them) sorted by name.
//  5. Test its quick run (bench/labtest: Run, CheckResult) against the
//     server's counters (Target.Stats) or other measured facts, and
//     describe it in docs/benchmarks.md.
//
// Workloads run hot loops: they reuse request messages, pre-build their
// inputs before the clock starts, and count in plain integers, so that the
// client is not what is measured.
package bench
