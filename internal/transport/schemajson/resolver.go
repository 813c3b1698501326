// Package schemajson converts API messages to and from JSON through the
// schema the server holds now, for the transports that speak JSON (the REST
// gateway, NATS with JSON payloads).
//
// Record types exist only at run time: they arrive as .proto source with
// ApplySchema and change without a restart. protojson needs a resolver to
// render a google.protobuf.Any ("@type" plus the record's fields) and to
// parse one back into bytes; Resolver answers from the current schema's
// registry on every call, so it follows ApplySchema immediately, and falls
// back to the types compiled into the binary (protobase.v1, google.rpc and
// the well-known types) for status details and the API's own messages.
// Unmarshal decodes requests so that their errors name the record to blame;
// DecodeCost and Resolver.EncodeCost estimate the memory a conversion
// takes, for the transports to hold against the server's budget.
package schemajson

import (
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Resolver implements the resolver interface of protojson (and of
// proto.UnmarshalOptions) over a registry that changes at run time.
//
// Invariant: a cached message type always belongs to the registry its
// cache was made for; a new registry (a new schema) starts a new cache, so
// a type never outlives the schema that declared it.
type Resolver struct {
	files func() *protoregistry.Files
	cache atomic.Pointer[typeCache]
}

// typeCache holds the dynamic message types built for one registry:
// building one walks its descriptor, so it is done once per type and schema.
type typeCache struct {
	files *protoregistry.Files
	types sync.Map // protoreflect.FullName -> protoreflect.MessageType
}

// New returns a Resolver reading the registry that files returns at each
// lookup (nil: only the compiled-in types). files must be cheap: it is
// called for every resolved type.
func New(files func() *protoregistry.Files) *Resolver {
	return &Resolver{files: files}
}

func (r *Resolver) current() *typeCache {
	var files *protoregistry.Files
	if r.files != nil {
		files = r.files()
	}
	c := r.cache.Load()
	if c == nil || c.files != files {
		// Racing callers may each build a cache for the new registry; the
		// last store wins and the others are garbage. Both are correct.
		c = &typeCache{files: files}
		r.cache.Store(c)
	}
	return c
}

// FindMessageByName looks in the runtime schema first, so a record type
// always resolves to the schema's definition, then in the binary.
func (r *Resolver) FindMessageByName(name protoreflect.FullName) (protoreflect.MessageType, error) {
	c := r.current()
	if mt, ok := c.types.Load(name); ok {
		return mt.(protoreflect.MessageType), nil
	}
	if c.files != nil {
		if d, err := c.files.FindDescriptorByName(name); err == nil {
			if md, ok := d.(protoreflect.MessageDescriptor); ok {
				// Generated types keep their Go type (status details such as
				// protobase.v1.WriteError must marshal as themselves).
				if mt, err := protoregistry.GlobalTypes.FindMessageByName(name); err == nil && mt.Descriptor().ParentFile().Path() == md.ParentFile().Path() {
					c.types.Store(name, mt)
					return mt, nil
				}
				mt := dynamicpb.NewMessageType(md)
				c.types.Store(name, mt)
				return mt, nil
			}
		}
	}
	return protoregistry.GlobalTypes.FindMessageByName(name)
}

// FindMessageByURL resolves the full name after the last '/', as
// google.protobuf.Any does.
func (r *Resolver) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	name := url
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		name = url[i+1:]
	}
	return r.FindMessageByName(protoreflect.FullName(name))
}

// FindExtensionByName resolves extensions compiled into the binary only:
// record schemas use the protobase.v1 options, which are.
func (r *Resolver) FindExtensionByName(field protoreflect.FullName) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByName(field)
}

// FindExtensionByNumber resolves extensions compiled into the binary only.
func (r *Resolver) FindExtensionByNumber(message protoreflect.FullName, field protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByNumber(message, field)
}
