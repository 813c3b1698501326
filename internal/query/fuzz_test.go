package query

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// fuzzSeeds are queries whose encodings seed FuzzCompile.
func fuzzSeeds() []*pb.Query {
	return []*pb.Query{
		{},
		{Where: and(eq("tenant", vs("a")), eq("id", vi(5)))},
		{Where: and(ge("age", vi(30)), pre("name", vs("An"))), Limit: 10},
		{Where: or(and(eq("age", vi(3)), eq("name", vs("x"))), eq("age", vi(1))), Order: &pb.Order{Index: "by_age_name", Descending: true}},
		{Where: in("name", vs("b"), vs("a")), KeysOnly: true},
		{Where: not(or(eq("score", vd(math.NaN())), lt("ratio", vd(1e300)))), Count: true},
		{Where: and(eq("status", venum("BANNED")), le("level", vu(3)), has("tags", vs("x")), eq("counts.value", vi(-1)))},
		{Where: and(eq("active", vb(true)), gt("blob", vby([]byte{0, 0xff}))), Order: &pb.Order{}},
		{Where: eq("agee", vi(1))},
	}
}

// FuzzCompile compiles arbitrary Query messages: Compile never panics and
// fails only with an *Error; a compiled plan has well-formed ranges, and
// on sample records its filter agrees with the reference semantics and its
// ranges hold every match.
func FuzzCompile(f *testing.F) {
	for _, q := range fuzzSeeds() {
		b, err := proto.Marshal(q)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	user, _ := targets(f)
	r := rand.New(rand.NewPCG(5, 6))
	type sample struct {
		m *dynamicpb.Message
		b []byte
	}
	var recs []sample
	for i := range 40 {
		m := randomUser(r, user)
		if i == 0 {
			m = benchUser(user)
		}
		recs = append(recs, sample{m: m, b: marshal(f, m)})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A slow input would only show as a stalled run; crash instead.
		tm := time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("input took over 5s: %q", data)) })
		defer tm.Stop()
		q := new(pb.Query)
		if err := proto.Unmarshal(data, q); err != nil {
			return
		}
		p, err := Compile(q, user, Limits{MaxRanges: 8})
		if err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				t.Fatalf("error %T: %v", err, err)
			}
			return
		}
		checkRanges(t, p, user)
		_ = p.Explain()
		for _, rc := range recs {
			want := q.Where == nil || refEval(q.Where, rc.m)
			full, err := p.fullFilter.Match(rc.b)
			if err != nil || full != want {
				t.Fatalf("Match = %v, %v; reference %v\nplan %s", full, err, want, p.Explain().Text)
			}
			key, val := keyOf(user, p.Index, rc.m)
			res, err := p.Filter.Match(rc.b)
			if err != nil {
				t.Fatal(err)
			}
			if got := inRanges(p.Ranges, key) && res; got != want {
				t.Fatalf("plan returns %v, reference %v\nplan %s", got, want, p.Explain().Text)
			}
			if p.Access == AccessIndexRange {
				pk, err := p.PKFromIndexEntry(key, val)
				pkKey, _ := keyOf(user, nil, rc.m)
				if err != nil || !bytes.Equal(p.RecordKey(nil, pk), pkKey) {
					t.Fatalf("PKFromIndexEntry: % x, %v", pk, err)
				}
			}
		}
		// Malformed record bytes give errors or answers, never panics.
		for _, b := range [][]byte{{0xff}, {0x1a, 0x7f}, recs[0].b[:len(recs[0].b)/2]} {
			_, _ = p.fullFilter.Match(b)
		}
	})
}
