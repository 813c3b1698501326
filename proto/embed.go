// Package proto embeds the .proto sources of the public API so that the server
// can compile user schemas that import "protobase/v1/options.proto" (and the
// google/api annotations) without reading the file system.
package proto

import "embed"

// FS holds protobase/v1/*.proto and google/api/*.proto, by import path.
//
//go:embed protobase/v1/*.proto google/api/*.proto
var FS embed.FS
