// Package experiments registers every experiment of the lab: importing it
// (for its side effects) makes them all available to bench.Experiments,
// bench.Lookup and `protobase-bench`. Each experiment is a package of its
// own under bench/ that registers itself in an init function; adding one
// to the lab is adding its import here.
package experiments

import (
	_ "github.com/protobase/protobase/bench/batching"
	_ "github.com/protobase/protobase/bench/concurrency"
	_ "github.com/protobase/protobase/bench/fetch"
	_ "github.com/protobase/protobase/bench/ingest"
	_ "github.com/protobase/protobase/bench/layout"
	_ "github.com/protobase/protobase/bench/oneop"
	_ "github.com/protobase/protobase/bench/patterns"
	_ "github.com/protobase/protobase/bench/transports"
	_ "github.com/protobase/protobase/bench/watch"
)
