// Package testschema holds the record schemas the tests share, as the
// proto source a client applies, and builds their records from JSON.
//
// Every schema is of package shop. They differ on purpose: tests rely on
// their field numbers, keys and indexes, so each variant is a constant of
// its own, and a test that needs a change of one derives it from the
// constant rather than editing it here.
package testschema

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
)

// File is the name the tests apply a schema under.
const File = "shop.proto"

// Shop is the schema of the server and robustness tests: shop.User (a
// unique index on email, a non-unique one on name, a repeated field),
// shop.Order with a composite primary key and a nested shop.Line.
const Shop = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";

message User {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "email" unique: true }
    index: { fields: "name" }
  };
  int64 id = 1;
  string name = 2;
  string email = 3;
  repeated string tags = 4;
}

message Order {
  option (protobase.v1.record) = { primary_key: ["user_id", "id"] };
  int64 user_id = 1;
  uint64 id = 2;
  double total = 3;
  Line line = 4;
}

message Line {
  string sku = 1;
  int32 qty = 2;
}
`

// ShopEmail is the command line's schema: one record type, shop.User,
// with a unique index on email.
const ShopEmail = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";
message User {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "email" unique: true } };
  int64 id = 1;
  string name = 2;
  string email = 3;
}
`

// ShopEmailOrders is ShopEmail and shop.Order keyed by id alone, for the
// command line's watch tests.
const ShopEmailOrders = ShopEmail + `
message Order {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  int64 user = 2;
  double total = 3;
}
`

// ShopMembers is the engine's schema: shop.User (unique email, indexed
// name) and shop.Member, whose composite key and composite unique index
// share a field.
const ShopMembers = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";

message User {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { fields: "email" unique: true }
    index: { fields: "name" }
  };
  int64 id = 1;
  string name = 2;
  string email = 3;
}

message Member {
  option (protobase.v1.record) = {
    primary_key: ["org", "id"]
    index: { fields: ["org", "handle"] unique: true }
  };
  string org = 1;
  int64 id = 2;
  string handle = 3;
}
`

// ShopAllKeys is the query planner's schema: shop.User has a composite
// primary key and indexes of every key kind (one of them, "building", is
// meant to be held in state BUILDING); shop.Doc has a one-field key.
const ShopAllKeys = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";

enum Status {
  STATUS_UNSPECIFIED = 0;
  ACTIVE = 1;
  BANNED = 2;
  NEG = -3;
}

message Address {
  string city = 1;
  string zip = 2;
  repeated string tags = 3;
}

message Item {
  string sku = 1;
  int32 qty = 2;
}

message User {
  option (protobase.v1.record) = {
    primary_key: ["tenant", "id"]
    index: { name: "users_by_name" fields: "name" }
    index: { name: "by_age_name" fields: ["age", "name"] }
    index: { name: "by_email" fields: "email" unique: true }
    index: { fields: "score" }
    index: { fields: "address.city" }
    index: { name: "by_status_level" fields: ["status", "level"] }
    index: { fields: "ratio" }
    index: { name: "by_active_blob" fields: ["active", "blob"] }
    index: { fields: "big" unique: true }
    index: { name: "building" fields: "delta" }
  };
  string tenant = 1;
  int64 id = 2;
  string name = 3;
  int32 age = 4;
  double score = 5;
  bool active = 6;
  Status status = 7;
  uint32 level = 8;
  bytes blob = 9;
  float ratio = 10;
  Address address = 11;
  repeated string tags = 12;
  repeated Item items = 13;
  repeated int64 nums = 14;
  string email = 15;
  sint64 delta = 16;
  uint64 big = 17;
  map<string, int64> counts = 18;
}

message Doc {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "title" } };
  int64 id = 1;
  string title = 2;
  int32 year = 3;
}
`

// ShopOptionExample is the example of the record option in
// proto/protobase/v1/options.proto, verbatim.
const ShopOptionExample = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";

message User {
  option (protobase.v1.record) = { primary_key: "id" index: { fields: "name" } index: { fields: ["country", "city"] unique: true } };
  int64 id = 1;
  string name = 2;
  string country = 3;
  string city = 4;
}
`

// Files is the file set that applies src as File.
func Files(src string) map[string]string { return map[string]string{File: src} }

// Record encodes the JSON js (protojson) as a record of md, deterministically,
// in an Any of md's type.
func Record(md protoreflect.MessageDescriptor, js string) (*anypb.Any, error) {
	m := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		return nil, fmt.Errorf("record %s %s: %w", md.FullName(), js, err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", md.FullName(), err)
	}
	return &anypb.Any{TypeUrl: "type.googleapis.com/" + string(md.FullName()), Value: b}, nil
}

// Descriptor finds the message typeName in set, a server's descriptors
// (GetSchema), as a client of a runtime schema would.
func Descriptor(set *descriptorpb.FileDescriptorSet, typeName string) (protoreflect.MessageDescriptor, error) {
	files, err := protodesc.NewFiles(set)
	if err != nil {
		return nil, fmt.Errorf("descriptors: %w", err)
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(typeName))
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", typeName, err)
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a message", typeName)
	}
	return md, nil
}

// ShopBatchSize is how many users, and as many orders, ShopBatch makes.
const ShopBatchSize = 100

// ShopBatch builds batch n of Shop records: ShopBatchSize users and as
// many orders, alternating, whose ids encode the batch (user
// n*ShopBatchSize+i; order of user_id n*ShopBatchSize+i and id n), so
// that a half-applied batch would show.
func ShopBatch(n int) []*anypb.Any {
	recs := make([]*anypb.Any, 0, 2*ShopBatchSize)
	for i := 0; i < ShopBatchSize; i++ {
		id := int64(n*ShopBatchSize + i)
		var u []byte
		u = protowire.AppendTag(u, 1, protowire.VarintType)
		u = protowire.AppendVarint(u, uint64(id))
		u = protowire.AppendTag(u, 2, protowire.BytesType)
		u = protowire.AppendString(u, fmt.Sprintf("user %d of batch %d", i, n))
		u = protowire.AppendTag(u, 3, protowire.BytesType)
		u = protowire.AppendString(u, fmt.Sprintf("u%d@example.com", id))
		var o []byte
		o = protowire.AppendTag(o, 1, protowire.VarintType)
		o = protowire.AppendVarint(o, uint64(id))
		o = protowire.AppendTag(o, 2, protowire.VarintType)
		o = protowire.AppendVarint(o, uint64(n))
		recs = append(recs,
			&anypb.Any{TypeUrl: "type.googleapis.com/shop.User", Value: u},
			&anypb.Any{TypeUrl: "type.googleapis.com/shop.Order", Value: o})
	}
	return recs
}
