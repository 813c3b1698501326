package query

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// benchUser is a shop.User of about 200 bytes.
func benchUser(t *Target) *dynamicpb.Message {
	m := newUser(t)
	set(m, "tenant", protoreflect.ValueOfString("acme-corporation"))
	set(m, "id", protoreflect.ValueOfInt64(42))
	set(m, "name", protoreflect.ValueOfString("Annabelle Lee-Richardson"))
	set(m, "age", protoreflect.ValueOfInt32(37))
	set(m, "score", protoreflect.ValueOfFloat64(88.5))
	set(m, "active", protoreflect.ValueOfBool(true))
	set(m, "status", protoreflect.ValueOfEnum(1))
	set(m, "level", protoreflect.ValueOfUint32(12))
	set(m, "blob", protoreflect.ValueOfBytes([]byte("0123456789abcdef")))
	set(m, "ratio", protoreflect.ValueOfFloat32(0.25))
	set(m, "address.city", protoreflect.ValueOfString("Saint-Petersburg"))
	set(m, "address.zip", protoreflect.ValueOfString("190000"))
	tags := m.Mutable(m.Descriptor().Fields().ByName("tags")).List()
	for _, s := range []string{"gold", "early-adopter", "newsletter"} {
		tags.Append(protoreflect.ValueOfString(s))
	}
	nums := m.Mutable(m.Descriptor().Fields().ByName("nums")).List()
	for i := range 8 {
		nums.Append(protoreflect.ValueOfInt64(int64(i * 1000)))
	}
	set(m, "email", protoreflect.ValueOfString("ann@example.com"))
	set(m, "delta", protoreflect.ValueOfInt64(-12345))
	set(m, "big", protoreflect.ValueOfUint64(1<<40))
	return m
}

func BenchmarkMatch(b *testing.B) {
	user, _ := targets(b)
	rec := marshal(b, benchUser(user))
	for _, bc := range []struct {
		name string
		e    *pb.Expr
	}{
		{"age>=30_AND_name_PREFIX_An", and(ge("age", vi(30)), pre("name", vs("An")))},
		{"email_IN_3", in("email", vs("a@b"), vs("ann@example.com"), vs("c@d"))},
		{"repeated_tags_EQ", eq("tags", vs("newsletter"))},
	} {
		p, err := Compile(&pb.Query{Where: bc.e}, user, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		f := p.fullFilter
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := f.Match(rec); !ok || err != nil {
					b.Fatal("no match")
				}
			}
		})
	}
	b.Logf("record size %d bytes", len(rec))
}

func BenchmarkCompilePoint(b *testing.B) {
	user, _ := targets(b)
	q := &pb.Query{Where: and(eq("tenant", vs("acme")), eq("id", vi(42)))}
	b.ReportAllocs()
	for b.Loop() {
		p, err := Compile(q, user, Limits{})
		if err != nil || p.Access != AccessPKPoint {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompileIndexRange(b *testing.B) {
	user, _ := targets(b)
	q := &pb.Query{Where: and(eq("age", vi(30)), pre("name", vs("An")), ne("email", vs("")))}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(q, user, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
