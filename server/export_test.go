package server

import "context"

// Flush and Compact reach the storage of a running server from the tests
// (this file is compiled only into them): the model test needs data in
// storage files so that parallel scans split, and the read benchmarks need
// the bulk load compacted into one sorted run, as after a quiet period.
// Neither is a feature of the public API.

// Flush writes s's memtables to storage files.
func Flush(s *Server) error { return s.eng.Flush() }

// Compact compacts s's whole store.
func Compact(ctx context.Context, s *Server) error { return s.eng.Compact(ctx) }
