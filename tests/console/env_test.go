package console_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// itemsProto declares the type the console browses: an int64 key, so
// that keys travel as JSON strings, and an index whose order differs
// from the key's.
const itemsProto = `syntax = "proto3";
package shop;
import "protobase/v1/options.proto";

message Item {
  option (protobase.v1.record) = {
    primary_key: "id"
    index: { name: "by_price" fields: ["price", "id"] }
    index: { fields: "category" }
  };
  int64 id = 1;
  string name = 2;
  int32 price = 3;
  string category = 4;
}
`

// secretsProto declares the type outside the scoped key's scope, in a
// file of its own so that the scoped key sees itemsProto's source.
const secretsProto = `syntax = "proto3";
package vault;
import "protobase/v1/options.proto";

message Secret {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  string note = 2;
}
`

const (
	itemType   = "shop.Item"
	secretType = "vault.Secret"
	itemCount  = 10000
	pageSize   = 50
)

// item is the seeded record of id.
type item struct {
	ID       int64
	Name     string
	Price    int32
	Category string
}

func seedItem(id int64) item {
	return item{ID: id, Name: fmt.Sprintf("item-%05d", id), Price: int32(id*7919%1000) + 1,
		Category: string(rune('a' + id%4))}
}

func (it item) json() string {
	return fmt.Sprintf(`{"id": %d, "name": %q, "price": %d, "category": %q}`, it.ID, it.Name, it.Price, it.Category)
}

// env is a server with API keys on, REST on a loopback port, the two
// types seeded, and the keys the scenarios sign in with.
type env struct {
	ts   *servertest.Server
	base string // the console's origin, http://127.0.0.1:port
	keys map[string]string
	logs *logBuffer // the server's log
}

// logBuffer keeps what the server logs; the server logs from many
// goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Key names: admin may do anything; reader reads every type; scoped
// writes shop.Item alone; revoked reads until a scenario revokes it.
const (
	adminKey   = "admin"
	readerKey  = "reader"
	scopedKey  = "scoped"
	revokedKey = "revoked"
)

func startEnv(t *testing.T) *env {
	t.Helper()
	admin, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	// Everything the server logs, down to debug and every query as slow,
	// is kept: no key may appear in it.
	logs := &logBuffer{}
	cfg := server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Auth: true, AdminKey: admin, NoSync: true, SlowQuery: time.Nanosecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	c, err := client.Dial(srv.Addr(), client.WithAPIKey(admin))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{ts: servertest.With(t, srv, cfg, c), base: "http://" + srv.HTTPAddr(), keys: map[string]string{adminKey: admin}, logs: logs}
	e.ts.MustApply(map[string]string{"shop/items.proto": itemsProto, "vault/secrets.proto": secretsProto})
	for _, k := range []struct {
		name  string
		role  pb.KeyRole
		types []string
	}{
		{readerKey, pb.KeyRole_KEY_ROLE_READ, nil},
		{scopedKey, pb.KeyRole_KEY_ROLE_WRITE, []string{itemType}},
		{revokedKey, pb.KeyRole_KEY_ROLE_READ, nil},
	} {
		resp, err := c.CreateKey(t.Context(), &pb.CreateKeyRequest{Name: k.name, Role: k.role, Types: k.types})
		if err != nil {
			t.Fatalf("create key %s: %v", k.name, err)
		}
		e.keys[k.name] = resp.Key
	}
	e.seed(t)
	return e
}

// seed inserts itemCount items through the batching writer, and a few
// secrets.
func (e *env) seed(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := e.ts.C.NewWriter(ctx, client.Insert, client.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= itemCount; id++ {
		if err := w.WriteJSON(itemType, []byte(seedItem(id).json())); err != nil {
			t.Fatalf("write item %d: %v", id, err)
		}
	}
	for id := 1; id <= 3; id++ {
		if err := w.WriteJSON(secretType, fmt.Appendf(nil, `{"id": %d, "note": "secret %d"}`, id, id)); err != nil {
			t.Fatalf("write secret %d: %v", id, err)
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatalf("seed: %v", err)
	}
}

// secrets are every key's text, which no URL and no console log may hold.
func (e *env) secrets() []string {
	var out []string
	for _, k := range e.keys {
		out = append(out, k)
	}
	return out
}

// itemsWhere returns the ids of the seeded items that keep says, in the
// order less says.
func itemsWhere(keep func(item) bool, less func(a, b item) bool) []int64 {
	var its []item
	for id := int64(1); id <= itemCount; id++ {
		if it := seedItem(id); keep(it) {
			its = append(its, it)
		}
	}
	sort.SliceStable(its, func(i, j int) bool { return less(its[i], its[j]) })
	ids := make([]int64, len(its))
	for i, it := range its {
		ids[i] = it.ID
	}
	return ids
}

func all(item) bool { return true }

func byID(a, b item) bool { return a.ID < b.ID }

func byPrice(a, b item) bool { return a.Price < b.Price || a.Price == b.Price && a.ID < b.ID }
