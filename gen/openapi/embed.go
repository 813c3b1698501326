// Package openapi embeds the OpenAPI (Swagger 2.0) description that
// protoc-gen-openapiv2 generates from proto/ (make generate), so the REST
// gateway serves it at /openapi.json from the binary. This file is written
// by hand; make generate keeps it and replaces only the .json beside it.
package openapi

import _ "embed"

// Spec is protobase.swagger.json.
//
//go:embed protobase.swagger.json
var Spec []byte
