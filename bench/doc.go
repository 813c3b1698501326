// Package bench is the Protobase lab: the experiments behind `protobase bench`,
// the harness that runs them against a real server over loopback TCP, and the
// statistics, tables, JSON and charts that report them beside the published
// figures of the seeds (see docs/benchmarks.md).
//
// The package owns the harness and the experiments; cmd/protobase only parses
// flags and calls Run. Every experiment talks to the server through its public
// gRPC API (and the lab API, protobase.lab.v1, for what needs the server's
// cooperation), never through the engine, so that it measures what a client
// sees.
//
// # Adding an experiment
//
//  1. Write a type implementing Experiment in its own file (bench/NAME.go):
//     Name and Describe, Flags to bind its own flags into its fields (they
//     appear on `protobase bench NAME`), and Run.
//  2. In Run, get a server with env.Target (an embedded lab server in a
//     fresh directory, or the --addr server), load data, then for each
//     configuration build a Workload and call env.Measure: it warms up,
//     repeats the workload env.Runs times and returns the per-run rates.
//     Turn them into rows with NewRow, attaching a Reference where a seed
//     published a figure. Honour env.Quick (fewer configurations, smaller
//     data) so that `--quick` stays well under a minute for all experiments
//     together.
//  3. Return a Result with a Chart describing how to draw the rows.
//  4. Register a constructor in an init function of that file:
//     func init() { Register(func() Experiment { return new(Mine) }) }
//     Experiments are listed (and `bench all` runs them) in registration
//     order, which is file-name order.
//  5. Add it to the end-to-end quick test (bench_test.go runs every
//     registered experiment) and describe it in docs/benchmarks.md.
//
// Workloads run hot loops: they reuse request messages, pre-build their
// inputs before the clock starts, and count in plain integers, so that the
// client is not what is measured.
package bench
