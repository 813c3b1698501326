package query

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
)

func TestValidationErrors(t *testing.T) {
	user, _ := targets(t)
	deep := eq("age", vi(1))
	for range 40 {
		deep = not(deep)
	}
	many := make([]*pb.Expr, 1001)
	for i := range many {
		many[i] = eq("age", vi(int64(i)))
	}
	manyVals := make([]*pb.Value, 10001)
	for i := range manyVals {
		manyVals[i] = vi(int64(i))
	}
	tests := []struct {
		name      string
		q         *pb.Query
		lim       Limits
		wantField string
		want      string // the whole Error() text
	}{
		{"unknown field", &pb.Query{Where: eq("agee", vi(1))}, Limits{}, "agee", `field agee: no field "agee" in shop.User`},
		{"unknown nested field", &pb.Query{Where: eq("address.cty", vs("x"))}, Limits{}, "address.cty", `field address.cty: no field "cty" in shop.Address`},
		{"path through scalar", &pb.Query{Where: eq("age.x", vi(1))}, Limits{}, "age.x", `field age.x: field "age" is a int32, not a message, so it has no field "x"`},
		{"empty segment", &pb.Query{Where: eq("address..city", vs("x"))}, Limits{}, "address..city", "field address..city: empty segment in field path"},
		{"no field", &pb.Query{Where: eq("", vi(1))}, Limits{}, "", "comparison has no field"},
		{"message field", &pb.Query{Where: eq("address", vs("x"))}, Limits{}, "address", `field address: field "address" is a message (shop.Address); compare one of its fields`},
		{"repeated message field", &pb.Query{Where: eq("items", vs("x"))}, Limits{}, "items", `field items: field "items" is a message (shop.Item); compare one of its fields`},
		{"int with string", &pb.Query{Where: eq("age", vs("x"))}, Limits{}, "age", "field age: type mismatch: int32 field compared with string"},
		{"int with double", &pb.Query{Where: eq("age", vd(1))}, Limits{}, "age", "field age: type mismatch: int32 field compared with double"},
		{"int with bool", &pb.Query{Where: eq("id", vb(true))}, Limits{}, "id", "field id: type mismatch: int64 field compared with bool"},
		{"int with enum", &pb.Query{Where: eq("age", venum("ACTIVE"))}, Limits{}, "age", "field age: type mismatch: int32 field compared with enum"},
		{"int with huge uint", &pb.Query{Where: eq("id", vu(math.MaxUint64))}, Limits{}, "id", "field id: value 18446744073709551615 out of range for int64 field"},
		{"unknown enum name", &pb.Query{Where: eq("status", venum("GONE"))}, Limits{}, "status", `field status: no value "GONE" in enum shop.Status`},
		{"enum with string", &pb.Query{Where: eq("status", vs("ACTIVE"))}, Limits{}, "status", "field status: type mismatch: enum field compared with string"},
		{"uint negative", &pb.Query{Where: eq("level", vi(-1))}, Limits{}, "level", "field level: negative value for unsigned field"},
		{"uint with double", &pb.Query{Where: eq("big", vd(1))}, Limits{}, "big", "field big: type mismatch: uint64 field compared with double"},
		{"double with string", &pb.Query{Where: eq("score", vs("1"))}, Limits{}, "score", "field score: type mismatch: double field compared with string"},
		{"float with bool", &pb.Query{Where: eq("ratio", vb(true))}, Limits{}, "ratio", "field ratio: type mismatch: float field compared with bool"},
		{"string with bytes", &pb.Query{Where: eq("name", vby([]byte("x")))}, Limits{}, "name", "field name: type mismatch: string field compared with bytes"},
		{"string with int", &pb.Query{Where: eq("name", vi(1))}, Limits{}, "name", "field name: type mismatch: string field compared with int"},
		{"string with a bare word", &pb.Query{Where: eq("name", venum("Ann"))}, Limits{}, "name", `field name: string field compared with the unquoted word Ann (an enum value name): quote a string, as in name = "Ann"`},
		{"bytes with int", &pb.Query{Where: eq("blob", vi(1))}, Limits{}, "blob", "field blob: type mismatch: bytes field compared with int"},
		{"bool with int", &pb.Query{Where: eq("active", vi(1))}, Limits{}, "active", "field active: type mismatch: bool field compared with int"},
		{"empty value", &pb.Query{Where: eq("age", &pb.Value{})}, Limits{}, "age", "field age: type mismatch: int32 field compared with an empty value"},
		{"repeated elem mismatch", &pb.Query{Where: eq("nums", vs("x"))}, Limits{}, "nums", "field nums: type mismatch: int64 field compared with string"},
		{"prefix on int", &pb.Query{Where: pre("age", vs("1"))}, Limits{}, "age", "field age: operator PREFIX not valid for int32 field"},
		{"contains on bool", &pb.Query{Where: has("active", vs("t"))}, Limits{}, "active", "field active: operator CONTAINS not valid for bool field"},
		{"op unspecified", &pb.Query{Where: cmpE("age", pb.Op_OP_UNSPECIFIED, vi(1))}, Limits{}, "age", "field age: comparison has no operator"},
		{"op unknown", &pb.Query{Where: cmpE("age", pb.Op(99), vi(1))}, Limits{}, "age", "field age: unknown operator 99"},
		{"in without values", &pb.Query{Where: in("age")}, Limits{}, "age", "field age: IN needs at least one value"},
		{"in with value", &pb.Query{Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "age", Op: pb.Op_OP_IN, Value: vi(1), Values: []*pb.Value{vi(1)}}}}}, Limits{}, "age", "field age: IN takes values, not value"},
		{"in with bad value", &pb.Query{Where: in("age", vi(1), vs("x"))}, Limits{}, "age", "field age: type mismatch: int32 field compared with string"},
		{"eq without value", &pb.Query{Where: eq("age", nil)}, Limits{}, "age", "field age: operator = needs a value"},
		{"eq with values", &pb.Query{Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{Field: "age", Op: pb.Op_OP_EQ, Value: vi(1), Values: []*pb.Value{vi(1)}}}}}, Limits{}, "age", "field age: operator = takes value, not values"},
		{"empty expr", &pb.Query{Where: and(eq("age", vi(1)), &pb.Expr{})}, Limits{}, "", "empty expression (no comparison, and, or, not)"},
		{"empty comparison", &pb.Query{Where: &pb.Expr{Expr: &pb.Expr_Cmp{}}}, Limits{}, "", "empty comparison"},
		{"not without operand", &pb.Query{Where: &pb.Expr{Expr: &pb.Expr_Not{}}}, Limits{}, "", "NOT without an operand"},
		{"too deep", &pb.Query{Where: deep}, Limits{}, "", "expression nested deeper than 32 levels (limit MaxDepth)"},
		{"too deep custom", &pb.Query{Where: and(or(eq("age", vi(1))))}, Limits{MaxDepth: 2}, "", "expression nested deeper than 2 levels (limit MaxDepth)"},
		{"too many nodes", &pb.Query{Where: and(many...)}, Limits{}, "", "expression has more than 1000 comparisons and operators (limit MaxNodes)"},
		{"too many in values", &pb.Query{Where: in("age", manyVals...)}, Limits{}, "age", "field age: query has more than 10000 IN values (limit MaxInValues)"},
		{"in values summed", &pb.Query{Where: or(in("age", vi(1), vi(2)), in("id", vi(1), vi(2)))}, Limits{MaxInValues: 3}, "id", "field id: query has more than 3 IN values (limit MaxInValues)"},
		{"unknown order index", &pb.Query{Order: &pb.Order{Index: "nope"}}, Limits{}, "", `order: no index "nope" on shop.User`},
		{"order by index not ready", &pb.Query{Order: &pb.Order{Index: "building"}}, Limits{}, "", `order: index "building" of shop.User is not ready (building)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.q, user, tc.lim)
			if err == nil {
				t.Fatalf("no error; plan %v", p.Explain().GetText())
			}
			var qe *Error
			if !errors.As(err, &qe) {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			if qe.Field != tc.wantField || err.Error() != tc.want {
				t.Errorf("error field %q %q\nwant field %q %q", qe.Field, err.Error(), tc.wantField, tc.want)
			}
		})
	}
}

func TestValidQueries(t *testing.T) {
	user, _ := targets(t)
	for _, q := range []*pb.Query{
		{},
		{Where: and()},
		{Where: or()},
		{Where: eq("status", venum("BANNED"))},
		{Where: eq("status", vi(99))},
		{Where: eq("age", vu(5))},
		{Where: eq("level", vi(5))},
		{Where: eq("score", vi(-5))},
		{Where: eq("score", vu(5))},
		{Where: eq("ratio", vd(0.1))},
		{Where: eq("blob", vs("x"))},
		{Where: lt("active", vb(true))},
		{Where: eq("counts.key", vs("a"))},
		{Where: gt("counts.value", vi(3))},
		{Where: pre("address.tags", vs("x"))},
		{Where: eq("items.qty", vi(3))},
		{Where: has("blob", vby([]byte{0}))},
		{Where: eq("age", vi(1)), Order: &pb.Order{}},
		{Where: eq("age", vi(1)), Order: &pb.Order{Index: "by_email", Descending: true}},
	} {
		if _, err := Compile(q, user, Limits{}); err != nil {
			t.Errorf("Compile(%v): %v", q, err)
		}
	}
}

func TestPlans(t *testing.T) {
	user, doc := targets(t)
	tests := []struct {
		name   string
		t      *Target
		q      *pb.Query
		lim    Limits
		want   string // Explain text
		ranges int    // -1: do not check
	}{
		{"no where", user, &pb.Query{}, Limits{}, "full_scan [1 range]", 1},
		{"pk point", user, &pb.Query{Where: and(eq("tenant", vs("a")), eq("id", vi(5)))}, Limits{}, "pk_point [1 range]", 1},
		{"pk point single field", doc, &pb.Query{Where: eq("id", vi(5))}, Limits{}, "pk_point [1 range]", 1},
		{"pk point with residual", user, &pb.Query{Where: and(eq("id", vi(5)), gt("age", vi(3)), eq("tenant", vs("a")))}, Limits{}, "pk_point [1 range] filter: age > 3", 1},
		{"pk points from IN", user, &pb.Query{Where: and(in("tenant", vs("a"), vs("b")), in("id", vi(5), vi(6), vi(5)))}, Limits{}, "pk_point [4 ranges]", 4},
		{"pk prefix", user, &pb.Query{Where: eq("tenant", vs("a"))}, Limits{}, "pk_range [1 range]", 1},
		{"pk range", doc, &pb.Query{Where: and(gt("id", vi(5)), le("id", vi(9)))}, Limits{}, "pk_range [1 range]", 1},
		{"pk prefix and range", user, &pb.Query{Where: and(eq("tenant", vs("a")), ge("id", vi(10)))}, Limits{}, "pk_range [1 range]", 1},
		{"pk point beats index", user, &pb.Query{Where: and(eq("tenant", vs("a")), eq("id", vi(5)), eq("email", vs("x")))}, Limits{}, "pk_point [1 range] filter: email = \"x\"", 1},
		{"index single field", user, &pb.Query{Where: eq("name", vs("Ann"))}, Limits{}, "index_range users_by_name [1 range]", 1},
		{"index with filter", user, &pb.Query{Where: and(eq("name", vs("Ann")), ge("score", vd(30)))}, Limits{}, "index_range users_by_name [1 range] filter: score >= 30", 1},
		{"composite index prefix", user, &pb.Query{Where: eq("age", vi(30))}, Limits{}, "index_range by_age_name [1 range]", 1},
		{"composite index prefix and range", user, &pb.Query{Where: and(eq("age", vi(30)), pre("name", vs("An")))}, Limits{}, "index_range by_age_name [1 range]", 1},
		{"more equalities win", user, &pb.Query{Where: and(eq("age", vi(30)), eq("name", vs("Ann")))}, Limits{}, "index_range by_age_name [1 range]", 1},
		{"unique beats non-unique", user, &pb.Query{Where: and(eq("email", vs("a@b")), eq("name", vs("Ann")))}, Limits{}, "index_range by_email [1 range] filter: name = \"Ann\"", 1},
		{"tie on name", user, &pb.Query{Where: and(eq("score", vd(1)), eq("address.city", vs("Paris")))}, Limits{}, "index_range address_city [1 range] filter: score = 1", 1},
		{"IN several ranges", user, &pb.Query{Where: in("name", vs("b"), vs("a"), vs("c"), vs("a"))}, Limits{}, "index_range users_by_name [3 ranges]", 3},
		{"IN capped to a hull", user, &pb.Query{Where: in("name", vs("b"), vs("a"), vs("c"))}, Limits{MaxRanges: 2}, `index_range users_by_name [1 range] filter: name IN ("b", "a", "c")`, 1},
		{"IN product capped", user, &pb.Query{Where: and(in("tenant", vs("a"), vs("b")), in("id", vi(1), vi(2), vi(3)))}, Limits{MaxRanges: 4}, `pk_range [2 ranges] filter: id IN (1, 2, 3)`, 2},
		{"PREFIX", user, &pb.Query{Where: pre("name", vs("An"))}, Limits{}, "index_range users_by_name [1 range]", 1},
		{"empty PREFIX", user, &pb.Query{Where: pre("name", vs(""))}, Limits{}, `full_scan [1 range] filter: name PREFIX ""`, 1},
		{"range", user, &pb.Query{Where: and(gt("score", vd(1)), lt("score", vd(5)))}, Limits{}, "index_range score [1 range] filter: score > 1", 1},
		{"contradiction", user, &pb.Query{Where: and(eq("name", vs("a")), eq("name", vs("b")))}, Limits{}, "index_range users_by_name [0 ranges]", 0},
		{"point outside range", user, &pb.Query{Where: and(eq("name", vs("a")), gt("name", vs("b")))}, Limits{}, "index_range users_by_name [0 ranges]", 0},
		{"int32 out of range GT", user, &pb.Query{Where: gt("age", vi(1<<40))}, Limits{}, "index_range by_age_name [0 ranges]", 0},
		{"int32 out of range LT", user, &pb.Query{Where: lt("age", vi(1<<40))}, Limits{}, "full_scan [1 range] filter: age < 1099511627776", 1},
		{"int32 out of range EQ", user, &pb.Query{Where: eq("age", vi(1<<40))}, Limits{}, "index_range by_age_name [0 ranges]", 0},
		{"uint32 out of range", user, &pb.Query{Where: ge("level", vu(1<<40))}, Limits{}, "full_scan [1 range] filter: level >= 1099511627776", 1},
		{"NaN EQ", user, &pb.Query{Where: eq("score", vd(math.NaN()))}, Limits{}, "index_range score [0 ranges]", 0},
		{"unindexed field", user, &pb.Query{Where: eq("delta", vi(3))}, Limits{}, "full_scan [1 range] filter: delta = 3", 1},
		{"repeated field", user, &pb.Query{Where: eq("tags", vs("x"))}, Limits{}, `full_scan [1 range] filter: tags = "x"`, 1},
		{"NE no range", user, &pb.Query{Where: ne("name", vs("x"))}, Limits{}, `full_scan [1 range] filter: name != "x"`, 1},
		{"NOT no range", user, &pb.Query{Where: not(eq("name", vs("x")))}, Limits{}, `full_scan [1 range] filter: NOT name = "x"`, 1},
		{"CONTAINS no range", user, &pb.Query{Where: has("name", vs("x"))}, Limits{}, `full_scan [1 range] filter: name CONTAINS "x"`, 1},
		{"OR same field", user, &pb.Query{Where: or(eq("name", vs("b")), eq("name", vs("a")))}, Limits{}, "index_range users_by_name [2 ranges]", 2},
		{"OR same index", user, &pb.Query{Where: or(and(eq("age", vi(3)), eq("name", vs("x"))), eq("age", vi(1)))}, Limits{}, `index_range by_age_name [2 ranges]`, 2},
		{"OR same index with residual", user, &pb.Query{Where: or(and(eq("age", vi(3)), eq("email", vs("x"))), gt("age", vi(10)))}, Limits{}, `index_range by_age_name [2 ranges] filter: (age = 3 AND email = "x") OR age > 10`, 2},
		{"OR overlapping ranges merge", user, &pb.Query{Where: or(and(eq("age", vi(3)), eq("name", vs("x"))), eq("age", vi(3)))}, Limits{}, `index_range by_age_name [1 range]`, 1},
		{"OR pk points", user, &pb.Query{Where: or(and(eq("tenant", vs("a")), eq("id", vi(1))), and(eq("tenant", vs("b")), eq("id", vi(2))))}, Limits{}, "pk_point [2 ranges]", 2},
		{"OR capped to a hull keeps the filter", user, &pb.Query{Where: or(and(eq("tenant", vs("a")), eq("id", vi(1))), and(eq("tenant", vs("b")), eq("id", vi(2))))}, Limits{MaxRanges: 1}, `pk_range [1 range] filter: (tenant = "a" AND id = 1) OR (tenant = "b" AND id = 2)`, 1},
		{"OR across fields", user, &pb.Query{Where: or(eq("name", vs("x")), eq("email", vs("y")))}, Limits{}, `full_scan [1 range] filter: name = "x" OR email = "y"`, 1},
		{"OR with unconstrained branch", user, &pb.Query{Where: or(eq("name", vs("x")), ne("name", vs("y")))}, Limits{}, `full_scan [1 range] filter: name = "x" OR name != "y"`, 1},
		{"AND of OR same field", user, &pb.Query{Where: and(or(eq("age", vi(1)), eq("age", vi(2))), eq("name", vs("a")))}, Limits{}, "index_range by_age_name [2 ranges]", 2},
		{"OR of ranges on one field", user, &pb.Query{Where: or(lt("age", vi(1)), and(gt("age", vi(5)), lt("age", vi(7))))}, Limits{}, "index_range by_age_name [2 ranges]", 2},
		{"enum and uint", user, &pb.Query{Where: and(eq("status", venum("ACTIVE")), lt("level", vu(3)))}, Limits{}, "index_range by_status_level [1 range]", 1},
		{"bool and bytes", user, &pb.Query{Where: and(eq("active", vb(true)), pre("blob", vby([]byte{0})))}, Limits{}, "index_range by_active_blob [1 range]", 1},
		{"building index unused", user, &pb.Query{Where: eq("delta", vi(1))}, Limits{}, "full_scan [1 range] filter: delta = 1", 1},
		{"order by index forces it", user, &pb.Query{Where: eq("name", vs("x")), Order: &pb.Order{Index: "score"}}, Limits{}, `index_range score [1 range] filter: name = "x"`, 1},
		{"order by index with its range", user, &pb.Query{Where: and(eq("name", vs("x")), gt("score", vd(2))), Order: &pb.Order{Index: "score"}}, Limits{}, `index_range score [1 range] filter: name = "x" AND score > 2`, 1},
		{"order by pk forces pk", user, &pb.Query{Where: eq("name", vs("x")), Order: &pb.Order{}}, Limits{}, `full_scan [1 range] filter: name = "x"`, 1},
		{"order by pk uses pk range", user, &pb.Query{Where: and(eq("name", vs("x")), eq("tenant", vs("t"))), Order: &pb.Order{}}, Limits{}, `pk_range [1 range] filter: name = "x"`, 1},
		{"descending", user, &pb.Query{Where: eq("name", vs("x")), Order: &pb.Order{Index: "users_by_name", Descending: true}, Limit: 10}, Limits{}, "index_range users_by_name [1 range] reverse limit 10", 1},
		{"descending pk", user, &pb.Query{Order: &pb.Order{Descending: true}, Count: true}, Limits{}, "full_scan [1 range] reverse count", 1},
		{"empty OR", user, &pb.Query{Where: or()}, Limits{}, "full_scan [1 range] filter: false", 1},
		{"empty AND", user, &pb.Query{Where: and()}, Limits{}, "full_scan [1 range]", 1},
		{"filter text", user, &pb.Query{Where: and(or(eq("status", vi(2)), not(and(eq("blob", vby([]byte("\x00"))), eq("ratio", vd(0.1))))), eq("delta", vi(1)))}, Limits{}, `full_scan [1 range] filter: (status = BANNED OR NOT (blob = b"\x00" AND ratio = 0.1)) AND delta = 1`, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.q, tc.t, tc.lim)
			if err != nil {
				t.Fatal(err)
			}
			ex := p.Explain()
			if ex.GetText() != tc.want {
				t.Errorf("plan\n got %s\nwant %s", ex.GetText(), tc.want)
			}
			if tc.ranges >= 0 && len(p.Ranges) != tc.ranges {
				t.Errorf("%d ranges, want %d", len(p.Ranges), tc.ranges)
			}
			if ex.GetRanges() != uint64(len(p.Ranges)) || ex.GetAccess() != p.Access.String() || ex.GetFilter() != p.Filter.String() {
				t.Errorf("explain %v does not match plan", ex)
			}
			if (p.Access == AccessIndexRange) != (ex.GetIndex() != "") {
				t.Errorf("explain index %q with access %v", ex.GetIndex(), p.Access)
			}
			checkRanges(t, p, tc.t)
		})
	}
}

// TestRangeBytes checks the encoded ranges of a few plans byte for byte.
func TestRangeBytes(t *testing.T) {
	user, doc := targets(t)
	ixByName := func(name string) []byte {
		ix, _ := user.Type.Index(name)
		return []byte{keyspace.TagIndex, byte(ix.ID >> 24), byte(ix.ID >> 16), byte(ix.ID >> 8), byte(ix.ID)}
	}
	docPrefix := []byte{keyspace.TagRecord, 0, 0, 0, byte(doc.Type.ID)}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	age := ixByName("by_age_name")
	enc30 := orderedcode.AppendInt(nil, 30)
	tests := []struct {
		name string
		t    *Target
		q    *pb.Query
		want []Range
	}{
		{"f1 = 5 on a 2-field key", user, &pb.Query{Where: eq("age", vi(30))},
			[]Range{{cat(age, enc30), orderedcode.PrefixEnd(cat(age, enc30))}}},
		{"f1 > 5", user, &pb.Query{Where: gt("age", vi(30))},
			[]Range{{cat(age, orderedcode.PrefixEnd(enc30)), orderedcode.PrefixEnd(cat(age, orderedcode.AppendInt(nil, math.MaxInt32)))}}},
		{"f1 <= 5", user, &pb.Query{Where: le("age", vi(30)), Order: &pb.Order{Index: "by_age_name"}},
			[]Range{{cat(age, orderedcode.AppendInt(nil, math.MinInt32)), orderedcode.PrefixEnd(cat(age, enc30))}}},
		{"f1 < 5 clamps at int32 min", user, &pb.Query{Where: lt("age", vi(30))},
			[]Range{{cat(age, orderedcode.AppendInt(nil, math.MinInt32)), cat(age, enc30)}}},
		{"prefix", user, &pb.Query{Where: and(eq("age", vi(30)), pre("name", vs("A\x00")))},
			[]Range{{cat(age, enc30, []byte("A\x00\xff")), cat(age, enc30, []byte("A\x01"))}}},
		{"pk point", doc, &pb.Query{Where: eq("id", vi(-1))},
			[]Range{{cat(docPrefix, orderedcode.AppendInt(nil, -1)), orderedcode.PrefixEnd(cat(docPrefix, orderedcode.AppendInt(nil, -1)))}}},
		{"pk max uint-like end", doc, &pb.Query{Where: ge("id", vi(math.MaxInt64))},
			[]Range{{cat(docPrefix, orderedcode.AppendInt(nil, math.MaxInt64)), orderedcode.PrefixEnd(docPrefix)}}},
		{"double -0 is 0", user, &pb.Query{Where: gt("score", vd(negZero))},
			[]Range{{cat(ixByName("score"), orderedcode.PrefixEnd(orderedcode.AppendFloat64(nil, 0))), orderedcode.PrefixEnd(ixByName("score"))}}},
		{"float beyond float32 range", user, &pb.Query{Where: gt("ratio", vd(1e300))},
			[]Range{{cat(ixByName("ratio"), orderedcode.AppendFloat32(nil, float32(math.Inf(1)))), orderedcode.PrefixEnd(ixByName("ratio"))}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.q, tc.t, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Ranges) != len(tc.want) {
				t.Fatalf("ranges %x, want %x", p.Ranges, tc.want)
			}
			for i := range tc.want {
				if !bytes.Equal(p.Ranges[i].Start, tc.want[i].Start) || !bytes.Equal(p.Ranges[i].End, tc.want[i].End) {
					t.Errorf("range %d: [% x, % x)\nwant [% x, % x)", i, p.Ranges[i].Start, p.Ranges[i].End, tc.want[i].Start, tc.want[i].End)
				}
			}
		})
	}
}

func TestPKFromIndexEntry(t *testing.T) {
	user, _ := targets(t)
	m := newUser(user)
	set(m, "tenant", protoreflect.ValueOfString("t\x00"))
	set(m, "id", protoreflect.ValueOfInt64(-7))
	set(m, "name", protoreflect.ValueOfString("Ann"))
	set(m, "age", protoreflect.ValueOfInt32(30))
	set(m, "email", protoreflect.ValueOfString("a@b"))
	pkKey, _ := keyOf(user, nil, m)
	for _, ixName := range []string{"users_by_name", "by_age_name", "by_email"} {
		ix, _ := user.Type.Index(ixName)
		p, err := Compile(&pb.Query{Order: &pb.Order{Index: ixName}}, user, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		k, v := keyOf(user, ix, m)
		pk, err := p.PKFromIndexEntry(k, v)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.RecordKey(nil, pk); !bytes.Equal(got, pkKey) {
			t.Errorf("%s: record key % x, want % x", ixName, got, pkKey)
		}
		if !inRanges(p.Ranges, k) {
			t.Errorf("%s: entry outside the whole-index range", ixName)
		}
		if !ix.Unique {
			if _, err := p.PKFromIndexEntry(k[:8], nil); err == nil {
				t.Errorf("%s: truncated entry accepted", ixName)
			}
		}
	}
	p, _ := Compile(&pb.Query{}, user, Limits{})
	if _, err := p.PKFromIndexEntry(pkKey, nil); err == nil {
		t.Error("PKFromIndexEntry on a full scan plan succeeded")
	}
}

// TestMatch checks semantics the property test only meets by chance.
func TestMatch(t *testing.T) {
	user, _ := targets(t)
	empty := marshal(t, newUser(user))
	m := newUser(user)
	set(m, "age", protoreflect.ValueOfInt32(-3))
	set(m, "score", protoreflect.ValueOfFloat64(math.NaN()))
	set(m, "ratio", protoreflect.ValueOfFloat32(0.1))
	set(m, "name", protoreflect.ValueOfString("Anna"))
	set(m, "address.city", protoreflect.ValueOfString("Paris"))
	set(m, "status", protoreflect.ValueOfEnum(-3))
	l := m.Mutable(m.Descriptor().Fields().ByName("tags")).List()
	l.Append(protoreflect.ValueOfString("x"))
	l.Append(protoreflect.ValueOfString("y"))
	full := marshal(t, m)
	tests := []struct {
		e          *pb.Expr
		empty, rec bool
	}{
		{eq("age", vi(0)), true, false},
		{eq("age", vi(-3)), false, true},
		{lt("age", vu(0)), false, true},
		{eq("name", vs("")), true, false},
		{pre("name", vs("An")), false, true},
		{pre("name", vs("")), true, true},
		{has("name", vs("nn")), false, true},
		{eq("address.city", vs("")), true, false},
		{eq("score", vd(math.NaN())), false, false},
		{ne("score", vd(math.NaN())), true, true},
		{ne("score", vd(1)), true, true},
		{ge("score", vd(math.Inf(-1))), true, false},
		{eq("score", vd(negZero)), true, false},
		{in("score", vd(math.NaN()), vd(0)), true, false},
		{eq("ratio", vd(0.1)), false, true},
		{le("ratio", vd(0.1)), true, true},
		{gt("ratio", vd(1e300)), false, false},
		{eq("status", venum("NEG")), false, true},
		{lt("status", vi(0)), false, true},
		{eq("tags", vs("y")), false, true},
		{ne("tags", vs("x")), false, true},
		{not(eq("tags", vs("x"))), true, false},
		{eq("tags", vs("")), false, false},
		{and(), true, true},
		{or(), false, false},
		{gt("active", vb(false)), false, false},
		{le("active", vb(false)), true, true},
		{in("active", vb(false)), true, true},
		{eq("age", vi(1<<40)), false, false},
		{lt("age", vi(1<<40)), true, true},
	}
	for _, tc := range tests {
		p, err := Compile(&pb.Query{Where: tc.e}, user, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			b    []byte
			want bool
		}{{empty, tc.empty}, {full, tc.rec}} {
			got, err := p.fullFilter.Match(c.b)
			if err != nil || got != c.want {
				t.Errorf("%s on %x: %v, %v; want %v", p.fullFilter, c.b, got, err, c.want)
			}
		}
	}
	// Malformed bytes are an error, not a match.
	p, _ := Compile(&pb.Query{Where: eq("name", vs("x"))}, user, Limits{})
	if _, err := p.fullFilter.Match([]byte{0x1a, 0x05, 'a'}); err == nil {
		t.Error("truncated record matched without error")
	}
	var nilFilter *Filter
	if ok, err := nilFilter.Match(full); !ok || err != nil {
		t.Error("nil filter does not match")
	}
	if s := nilFilter.String(); s != "" {
		t.Errorf("nil filter string %q", s)
	}
}

func TestMatchAllocs(t *testing.T) {
	user, _ := targets(t)
	m := benchUser(user)
	rec := marshal(t, m)
	p, err := Compile(&pb.Query{Where: and(ge("age", vi(30)), pre("name", vs("An")), in("email", vs("x"), vs("ann@example.com")), in("id", vi(1), vi(42)))}, user, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if ok, err := p.fullFilter.Match(rec); !ok || err != nil {
			t.Fatal("no match")
		}
	})
	if allocs != 0 {
		t.Errorf("Match allocates %v times", allocs)
	}
}

func TestErrorString(t *testing.T) {
	if s := (&Error{Reason: "r"}).Error(); s != "r" {
		t.Error(s)
	}
	if s := AccessPKRange.String(); s != "pk_range" || !strings.HasPrefix(Access(9).String(), "Access(") {
		t.Error(s)
	}
	if _, err := Compile(nil, nil, Limits{}); err == nil {
		t.Error("nil query accepted")
	}
}
