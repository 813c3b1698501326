package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/internal/store/pebble"
	"github.com/protobase/protobase/server"
)

// versionBackends are the stores the version tests run on: a Pebble
// directory, and one etcd member.
func versionBackends() []struct {
	name string
	cfg  func(t *testing.T) server.Config
} {
	return []struct {
		name string
		cfg  func(t *testing.T) server.Config
	}{
		{"pebble", func(*testing.T) server.Config { return server.Config{} }},
		{"etcd", func(t *testing.T) server.Config {
			return server.Config{Store: server.StoreEtcd, Etcd: server.EtcdConfig{
				Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/versions/"}}
		}},
	}
}

// versioned is a record as a read returned it, with its version.
type versioned struct {
	rec []byte
	ver uint64
}

// readAll reads the users matching filter through every read path, asking
// for versions, and returns each path's answer by the path's name: Query
// pages, Scan with one part and with three, Search with two queries in a
// request and with one alone.
func readAll(t *testing.T, ts *testServer, filter string) map[string][]versioned {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := func() *pb.Query { return &pb.Query{Type: "shop.User", Filter: filter, Versions: true} }
	out := map[string][]versioned{}
	page, err := ts.C.Query(ctx, q(), 2, "")
	for err == nil {
		if len(page.Versions) != len(page.Records) {
			t.Fatalf("Query page: %d versions for %d records", len(page.Versions), len(page.Records))
		}
		for i, r := range page.Records {
			out["query"] = append(out["query"], versioned{r.Value, page.Versions[i]})
		}
		if page.Token == "" {
			break
		}
		page, err = ts.C.Query(ctx, q(), 2, page.Token)
	}
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	for _, par := range []uint32{1, 3} {
		sc := ts.C.Scan(ctx, q(), client.ScanOptions{Parallelism: par, BatchSize: 2})
		for sc.Next() {
			k := fmt.Sprint("scan/", par)
			out[k] = append(out[k], versioned{sc.Record().Value, sc.Version()})
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("Scan: %v", err)
		}
	}
	s, err := ts.C.NewSearch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Two queries in a request, then one alone on the idle stream, which
	// the server answers as wire bytes when it asks for no versions.
	for i, qs := range [][]*pb.Query{{q(), q()}, {q()}} {
		rs, err := s.Batch(qs)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range rs {
			k := fmt.Sprint("search/", 2*i+j)
			for {
				a, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("Search: %v", err)
				}
				out[k] = append(out[k], versioned{a.Value, r.Version()})
			}
		}
	}
	return out
}

// getVersions reads the users of ids with Get, asking for versions.
func getVersions(t *testing.T, ts *testServer, ids ...int) ([]*anypb.Any, []uint64) {
	t.Helper()
	keys := make([]any, len(ids))
	for i, id := range ids {
		keys[i] = id
	}
	recs, vers, err := ts.C.GetVersioned(context.Background(), "shop.User", keys...)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return recs, vers
}

// Every read path returns, when asked, each record's version beside its
// unchanged bytes: the same on every path, shared by the records of one
// batch, greater after a rewrite, unchanged for records a batch does not
// write; a record that is absent has version 0.
func TestReadsReturnVersions(t *testing.T) {
	for _, be := range versionBackends() {
		t.Run(be.name, func(t *testing.T) {
			ts := startServer(t, be.cfg(t))
			ts.MustApply(map[string]string{"shop.proto": shopProto})
			ts.MustWrite(insert, []*anypb.Any{
				ts.Rec("shop.User", `{"id": 1, "name": "Ann", "email": "ann@x"}`),
				ts.Rec("shop.User", `{"id": 2, "name": "Bob", "email": "bob@x"}`),
				ts.Rec("shop.User", `{"id": 3, "name": "Bob", "email": "cy@x"}`),
			})
			recs, v1 := getVersions(t, ts, 1, 2, 3, 4)
			if v1[0] == 0 || v1[1] != v1[0] || v1[2] != v1[0] || v1[3] != 0 || recs[3] != nil {
				t.Fatalf("versions after one batch: %v, want one non-zero version for its three records and 0 for the absent key", v1)
			}
			// A record's version is the commit of the batch that wrote it:
			// the position the write acknowledges and Watch reports.
			ack := ts.MustWrite(update, []*anypb.Any{ts.Rec("shop.User", `{"id": 2, "name": "Bob", "email": "bob2@x"}`)})
			if _, v := getVersions(t, ts, 2); v[0] != ack.Position {
				t.Fatalf("user 2's version after its update: %d, want the update's position %d", v[0], ack.Position)
			}
			ts.MustWrite(remove, []*anypb.Any{ts.Rec("shop.User", `{"id": 3}`)})
			recs, v2 := getVersions(t, ts, 1, 2, 3)
			if v2[0] != v1[0] || v2[1] <= v1[1] || v2[2] != 0 || recs[2] != nil {
				t.Fatalf("versions after an update of 2 and a removal of 3: %v (before %v)", v2, v1)
			}
			plain, err := ts.C.Get(context.Background(), "shop.User", 1, 2)
			if err != nil {
				t.Fatal(err)
			}
			want := []versioned{{plain[0].Value, v2[0]}, {plain[1].Value, v2[1]}}
			for _, filter := range []string{"", `id >= 1`, `id = 2`, `name = "Bob" or email = "ann@x"`} {
				paths := readAll(t, ts, filter)
				if len(paths) != 6 {
					t.Errorf("filter %q: answers from %d read paths, want 6: %v", filter, len(paths), paths)
				}
				for path, got := range paths {
					w := want
					if filter == `id = 2` {
						w = want[1:]
					}
					slices.SortFunc(got, func(a, b versioned) int { return int(a.ver) - int(b.ver) })
					if !slices.EqualFunc(got, w, func(a, b versioned) bool { return a.ver == b.ver && string(a.rec) == string(b.rec) }) {
						t.Errorf("filter %q, %s: %v, want %v", filter, path, got, w)
					}
				}
			}
			// Without asking, no versions travel.
			page, err := ts.C.Query(context.Background(), &pb.Query{Type: "shop.User"}, 10, "")
			if err != nil || len(page.Versions) != 0 || len(page.Records) != 2 {
				t.Fatalf("a query without versions: %d records, versions %v, %v", len(page.Records), page.Versions, err)
			}
		})
	}
}

// storeBeforeVersions is a copy of the store the release before versions
// wrote (the Pebble store's test data), in a temporary directory.
func storeBeforeVersions(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "internal", "store", "pebble", "testdata", "store-before-versions"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A store the release before versions wrote opens: its records read as
// written, at one version above 0, and a record written after that reads
// at a greater one.
func TestStoreBeforeVersions(t *testing.T) {
	dir := storeBeforeVersions(t)
	ts := startServer(t, server.Config{DataDir: dir})
	recs, vers := getVersions(t, ts, 1, 2, 3, 4)
	if recs[0] == nil || recs[1] == nil || recs[2] == nil || recs[3] != nil {
		t.Fatalf("the earlier release's users 1-3 (4 removed): %v", recs)
	}
	floor := vers[0]
	if floor == 0 || vers[1] != floor || vers[2] != floor || vers[3] != 0 {
		t.Fatalf("versions of the earlier release's records: %v, want one version above 0 for all, 0 for the removed", vers)
	}
	u2 := ts.Rec("shop.User", `{"id": 2, "name": "Bob", "email": "bob2@example.com"}`)
	if !proto.Equal(recs[1], u2) {
		t.Fatalf("user 2 reads %v, want the update the earlier release stored", recs[1])
	}
	ts.MustWrite(update, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "name": "Ann", "email": "ann2@example.com"}`)})
	ts = ts.restart()
	_, after := getVersions(t, ts, 1, 2)
	if after[0] <= floor || after[1] != floor {
		t.Fatalf("after a rewrite of user 1 and a restart: %v, want user 1 above %d and user 2 at it", after, floor)
	}
	paths := readAll(t, ts, "")
	if len(paths) != 6 {
		t.Errorf("answers from %d read paths, want 6", len(paths))
	}
	for path, got := range paths {
		if len(got) != 3 {
			t.Errorf("%s: %d records, want 3", path, len(got))
		}
		for _, v := range got {
			if v.ver != floor && v.ver != after[0] {
				t.Errorf("%s: version %d, want %d or %d", path, v.ver, floor, after[0])
			}
		}
	}
}

// storedFormat returns the format of the schema state stored in the data
// directory dir, which no server holds.
func storedFormat(t *testing.T, dir string) int {
	t.Helper()
	st, err := pebble.Open(pebble.Options{Dir: dir, Layout: keyspace.Layout{}, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	raw, found, err := st.Get([]byte(keyspace.SchemaKey), nil)
	if err != nil || !found {
		t.Fatalf("schema state: found %v, %v", found, err)
	}
	f, err := schema.StoredFormat(raw)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A store whose records carry version headers holds its schema state in a
// format the releases before versions refuse (they read formats 1 and 2
// only): a new store from its first schema on, and a store of the release
// before versions from the moment this release opens it, before it writes
// a record.
func TestStoreFormatRefusesEarlierReleases(t *testing.T) {
	dir := storeBeforeVersions(t)
	if f := storedFormat(t, dir); f != 2 {
		t.Fatalf("the earlier release's store holds format %d, want 2", f)
	}
	ts := startServer(t, server.Config{DataDir: dir})
	ts.Stop()
	if f := storedFormat(t, dir); f != schema.Format || f <= 2 {
		t.Fatalf("after this release opened it: format %d, want %d, which the earlier release refuses", f, schema.Format)
	}
	ts = startServer(t, server.Config{DataDir: dir})
	if recs, _ := getVersions(t, ts, 1, 2, 3); recs[0] == nil || recs[1] == nil || recs[2] == nil {
		t.Fatalf("the earlier release's users after the rewrite: %v", recs)
	}
	ts.Stop()

	dir = t.TempDir()
	ts = startServer(t, server.Config{DataDir: dir})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.Stop()
	if f := storedFormat(t, dir); f != schema.Format {
		t.Fatalf("a new store: format %d, want %d", f, schema.Format)
	}
}

// Primary-key lookups that ask for versions get them whether they come
// many to a request or alone, with an expression or a text filter: the
// paths that answer plain lookups from the record cache and as wire bytes
// give way to the one that reads versions.
func TestLookupsReturnVersions(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 1, "name": "Ann", "email": "ann@x"}`)})
	ts.MustWrite(insert, []*anypb.Any{ts.Rec("shop.User", `{"id": 2, "name": "Bob", "email": "bob@x"}`)})
	_, want := getVersions(t, ts, 1, 2)
	if want[0] == 0 || want[1] <= want[0] {
		t.Fatalf("versions of two users written one after the other: %v", want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := ts.C.NewSearch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lookup := func(id int) *pb.Query {
		return &pb.Query{Type: "shop.User", Where: client.Eq("id", id), Versions: true}
	}
	check := func(round, i, id int, r *client.Results) {
		t.Helper()
		a, err := r.Next()
		if err != nil || a == nil {
			t.Fatalf("round %d, lookup %d: %v", round, i, err)
		}
		if r.Version() != want[id-1] {
			t.Errorf("round %d, lookup %d of user %d: version %d, want %d", round, i, id, r.Version(), want[id-1])
		}
	}
	for round := range 3 { // the record cache holds the users after the first
		rs, err := s.Batch([]*pb.Query{lookup(1), lookup(2), {Type: "shop.User", Filter: "id = 2", Versions: true}})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rs {
			check(round, i, []int{1, 2, 2}[i], r)
		}
		// Alone on an idle stream: the lookups the server runs as they
		// arrive.
		for _, ids := range [][]int{{1}, {2}, {1, 2}} {
			var qs []*pb.Query
			for _, id := range ids {
				qs = append(qs, lookup(id))
			}
			rs, err := s.Batch(qs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range rs {
				check(round, 3+i, ids[i], r)
			}
		}
	}
}
