// Package release holds the tests of what is shipped: the binaries
// scripts/release builds (make release) and the container image the
// Containerfile describes. It has no code of its own; the tests build the
// binary as a release does and run it as the image would.
package release
