package testschema_test

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/testschema"
)

// Every shared schema compiles as the server compiles it, with the record
// types its tests name; a record built from JSON carries its type's URL.
func TestSchemasCompile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   string
		types []string
	}{
		{"Shop", testschema.Shop, []string{"shop.Order", "shop.User"}},
		{"ShopEmail", testschema.ShopEmail, []string{"shop.User"}},
		{"ShopEmailOrders", testschema.ShopEmailOrders, []string{"shop.Order", "shop.User"}},
		{"ShopMembers", testschema.ShopMembers, []string{"shop.Member", "shop.User"}},
		{"ShopAllKeys", testschema.ShopAllKeys, []string{"shop.Doc", "shop.User"}},
		{"ShopOptionExample", testschema.ShopOptionExample, []string{"shop.User"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := schema.Compile(t.Context(), testschema.Files(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for name := range c.Types {
				got = append(got, string(name))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.types) {
				t.Fatalf("record types %v, want %v", got, tc.types)
			}
			a, err := testschema.Record(c.Types["shop.User"].Desc, `{"id": "7"}`)
			if err != nil {
				t.Fatal(err)
			}
			if a.TypeUrl != "type.googleapis.com/shop.User" || len(a.Value) == 0 {
				t.Fatalf("record %v", a)
			}
		})
	}
}

// Bad JSON and an unknown type are errors that name what failed.
func TestRecordErrors(t *testing.T) {
	c, err := schema.Compile(t.Context(), testschema.Files(testschema.Shop))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testschema.Record(c.Types["shop.User"].Desc, `{"nope": 1}`); err == nil {
		t.Fatal("a record with an unknown field: no error")
	}
	if _, err := testschema.Descriptor(&descriptorpb.FileDescriptorSet{}, "shop.User"); err == nil {
		t.Fatal("a type missing from the descriptors: no error")
	}
}
