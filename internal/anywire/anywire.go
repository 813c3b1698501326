// Package anywire gives internal/engine the names it reads internal/wire
// by: the field numbers of google.protobuf.Any, internal/wire's own;
// other code imports internal/wire.
package anywire

import "github.com/protobase/protobase/internal/wire"

// Field numbers of google.protobuf.Any, as internal/wire declares them.
const (
	FieldTypeURL = wire.AnyTypeURL
	FieldValue   = wire.AnyValue
)
