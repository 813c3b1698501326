package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Types are the message types of one schema version, built from the
// descriptors GetSchema returns (protodesc, dynamicpb): they let a program
// with no generated code build records, read them and convert them to and
// from protobuf JSON. A Types is immutable and safe for concurrent use; a
// schema change needs a new one (Client.RefreshTypes).
type Types struct {
	version uint64
	records map[string]bool // record types (full names)
	// keys holds each record type's primary-key field paths, in order.
	keys  map[string][]string
	files *protoregistry.Files
	types *dynamicpb.Types
}

// NewTypes builds the types of a GetSchema response.
func NewTypes(schema *pb.GetSchemaResponse) (*Types, error) {
	if schema.GetDescriptors() == nil {
		return nil, fmt.Errorf("schema version %d has no descriptors", schema.GetVersion())
	}
	files, err := protodesc.NewFiles(schema.GetDescriptors())
	if err != nil {
		return nil, fmt.Errorf("schema version %d: build descriptors: %w", schema.GetVersion(), err)
	}
	t := &Types{version: schema.GetVersion(), records: map[string]bool{}, keys: map[string][]string{},
		files: files, types: dynamicpb.NewTypes(files)}
	for _, rt := range schema.GetTypes() {
		t.records[rt.GetName()] = true
		t.keys[rt.GetName()] = rt.GetPrimaryKey()
	}
	return t, nil
}

// Version is the schema version the types were built from.
func (t *Types) Version() uint64 { return t.version }

// Descriptor returns the descriptor of the message type name ("shop.User").
func (t *Types) Descriptor(name string) (protoreflect.MessageDescriptor, error) {
	d, err := t.files.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		return nil, fmt.Errorf("no message type %q in schema version %d", name, t.version)
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("%q is not a message type", name)
	}
	return md, nil
}

// New returns an empty record of the message type name, to fill through
// protoreflect and pass to Writer.Write.
func (t *Types) New(name string) (*dynamicpb.Message, error) {
	md, err := t.Descriptor(name)
	if err != nil {
		return nil, err
	}
	return dynamicpb.NewMessage(md), nil
}

// FromJSON builds a record of the record type name from protobuf JSON
// (`{"id": 7, "name": "ann"}`; 64-bit integers may be strings). Unknown
// fields are an error, as the server would refuse them.
func (t *Types) FromJSON(name string, js []byte) (*anypb.Any, error) {
	if !t.records[name] {
		return nil, fmt.Errorf("no record type %q in schema version %d", name, t.version)
	}
	m, err := t.New(name)
	if err != nil {
		return nil, err
	}
	if err := (protojson.UnmarshalOptions{Resolver: t.types}).Unmarshal(js, m); err != nil {
		return nil, fmt.Errorf("%s from JSON: %w", name, err)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &anypb.Any{TypeUrl: typeURLPrefix + name, Value: b}, nil
}

// Message decodes a record (as Search, Scan, Query and Get return them)
// into a dynamic message of its type.
func (t *Types) Message(rec *anypb.Any) (*dynamicpb.Message, error) {
	name := typeName(rec.GetTypeUrl())
	m, err := t.New(name)
	if err != nil {
		return nil, err
	}
	if err := (proto.UnmarshalOptions{Resolver: t.types}).Unmarshal(rec.GetValue(), m); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// JSON renders a record as protobuf JSON of its fields (without "@type"),
// with lowerCamelCase JSON names as the REST gateway writes them, in a
// compact form that is stable from run to run (protojson's own output
// varies its spacing on purpose).
func (t *Types) JSON(rec *anypb.Any) ([]byte, error) {
	m, err := t.Message(rec)
	if err != nil {
		return nil, err
	}
	b, err := protojson.MarshalOptions{Resolver: t.types}.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Resolver resolves the schema's message types by name and type URL, for
// protojson and prototext options.
func (t *Types) Resolver() interface {
	protoregistry.MessageTypeResolver
	protoregistry.ExtensionTypeResolver
} {
	return t.types
}

const typeURLPrefix = "type.googleapis.com/"

// typeCache holds the client's Types of the latest schema it fetched.
type typeCache struct {
	mu    sync.Mutex // guards types; held while fetching, so one fetch at a time
	types *Types
}

// Types returns the server's types, fetched with GetSchema on first use
// and kept; RefreshTypes fetches them again after a schema change.
func (c *Client) Types(ctx context.Context) (*Types, error) {
	c.tc.mu.Lock()
	defer c.tc.mu.Unlock()
	if c.tc.types != nil {
		return c.tc.types, nil
	}
	return c.fetchTypesLocked(ctx)
}

// RefreshTypes fetches the server's types again and keeps them.
func (c *Client) RefreshTypes(ctx context.Context) (*Types, error) {
	c.tc.mu.Lock()
	defer c.tc.mu.Unlock()
	return c.fetchTypesLocked(ctx)
}

func (c *Client) fetchTypesLocked(ctx context.Context) (*Types, error) {
	resp, err := c.GetSchema(ctx)
	if err != nil {
		return nil, err
	}
	t, err := NewTypes(resp)
	if err != nil {
		return nil, err
	}
	c.tc.types = t
	return t, nil
}

// recordTypes returns types that know the record type name, fetching
// them again once when the kept ones do not (the schema may have changed
// since they were fetched).
func (c *Client) recordTypes(ctx context.Context, name string) (*Types, error) {
	t, err := c.Types(ctx)
	if err != nil || t.records[name] {
		return t, err
	}
	return c.RefreshTypes(ctx)
}
