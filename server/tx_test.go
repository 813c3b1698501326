package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
)

// bankProto is the schema of the transaction tests: accounts with a
// balance, the transfers between them, and counters.
const bankProto = `syntax = "proto3";
package bank;
import "protobase/v1/options.proto";

message Account {
  option (protobase.v1.record) = { primary_key: "id" };
  int64 id = 1;
  int64 balance = 2;
  string owner = 3;
}

message Transfer {
  option (protobase.v1.record) = { primary_key: "id" };
  string id = 1;
  int64 from = 2;
  int64 to = 3;
  int64 amount = 4;
}

message Counter {
  option (protobase.v1.record) = { primary_key: "name" };
  string name = 1;
  int64 value = 2;
}
`

// txServer is a server with the bank schema applied.
func txServer(t *testing.T, cfg server.Config) *testServer {
	t.Helper()
	ts := startServer(t, cfg)
	ts.MustApply(map[string]string{"bank.proto": bankProto})
	return ts
}

func account(ts *testServer, id, balance int64) *anypb.Any {
	return ts.Rec("bank.Account", fmt.Sprintf(`{"id": %d, "balance": %d}`, id, balance))
}

// intField is the integer field name of rec, decoded with the server's
// schema; 0 for a nil record.
func intField(t *testing.T, c *client.Client, rec *anypb.Any, name string) int64 {
	t.Helper()
	v, err := decodeInt(c, rec, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// decodeInt is intField for goroutines other than the test's.
func decodeInt(c *client.Client, rec *anypb.Any, name string) (int64, error) {
	if rec == nil {
		return 0, nil
	}
	types, err := c.Types(context.Background())
	if err != nil {
		return 0, err
	}
	m, err := types.Message(rec)
	if err != nil {
		return 0, err
	}
	return servertest.FieldValue(m, name).Int(), nil
}

// balances reads the stored accounts by id.
func balances(t *testing.T, ts *testServer) map[int64]int64 {
	t.Helper()
	out := map[int64]int64{}
	for _, m := range ts.Records("bank.Account") {
		out[servertest.FieldValue(m, "id").Int()] = servertest.FieldValue(m, "balance").Int()
	}
	return out
}

func txContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A transaction whose read is overwritten from outside before every commit
// gives up after MaxAttempts with ABORTED: an *AbortedError naming the
// attempts, wrapping the last commit's error, whose detail names the
// condition and the version it found; none of its writes applied.
func TestTransactRetriesExhausted(t *testing.T) {
	for _, b := range versionBackends() {
		t.Run(b.name, func(t *testing.T) {
			ts := txServer(t, b.cfg(t))
			ts.MustWrite(insert, []*anypb.Any{account(ts, 1, 100)})
			runs := 0
			var last uint64 // the position of the last outside write
			err := ts.C.Transact(txContext(t), func(tx *client.Tx) error {
				runs++
				if runs != tx.Attempt() {
					t.Errorf("run %d: Attempt() = %d", runs, tx.Attempt())
				}
				if _, err := tx.Get("bank.Account", 1); err != nil {
					return err
				}
				// A write outside the transaction lands between its read
				// and its commit (a test's doing: fn must not write
				// outside tx).
				last = ts.MustWrite(update, []*anypb.Any{account(ts, 1, int64(runs))}).Position
				return tx.Update(account(ts, 1, 1000))
			}, client.TxOptions{MaxAttempts: 3, Backoff: time.Millisecond})
			var ae *client.AbortedError
			if !errors.As(err, &ae) || ae.Attempts != 3 || runs != 3 {
				t.Fatalf("Transact = %v after %d runs; want an *AbortedError of 3 attempts", err, runs)
			}
			if !errors.Is(err, client.ErrAborted) || status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "3 attempts") {
				t.Errorf("%v: want errors.Is ErrAborted, code Aborted, a message naming the attempts", err)
			}
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Write == nil || ce.Write.Condition == nil || *ce.Write.Condition != 0 || ce.Write.Version != last {
				t.Errorf("%v: want the write detail of condition 0 finding version %d, got %v", err, last, ce)
			}
			if got := balances(t, ts)[1]; got != 3 {
				t.Errorf("balance %d, want 3 (the last outside write; no commit applied)", got)
			}
		})
	}
}

// An error other than ABORTED, from fn or from the commit, is returned at
// once: fn runs once and nothing of it applies.
func TestTransactErrorNotRetried(t *testing.T) {
	ts := txServer(t, server.Config{})
	ts.MustWrite(insert, []*anypb.Any{account(ts, 1, 100)})
	ctx := txContext(t)
	boom := errors.New("boom")
	runs := 0
	err := ts.C.Transact(ctx, func(tx *client.Tx) error {
		runs++
		if _, err := tx.Get("bank.Account", 1); err != nil {
			return err
		}
		if err := tx.Update(account(ts, 1, 5)); err != nil {
			return err
		}
		return boom
	}, client.TxOptions{})
	if !errors.Is(err, boom) || runs != 1 {
		t.Fatalf("fn's error: Transact = %v after %d runs; want boom after 1", err, runs)
	}
	runs = 0
	err = ts.C.Transact(ctx, func(tx *client.Tx) error {
		runs++
		return tx.Insert(account(ts, 1, 5)) // exists: ALREADY_EXISTS at commit
	}, client.TxOptions{})
	if status.Code(err) != codes.AlreadyExists || runs != 1 || errors.Is(err, client.ErrAborted) {
		t.Fatalf("a failing commit: Transact = %v after %d runs; want ALREADY_EXISTS after 1", err, runs)
	}
	if got := balances(t, ts)[1]; got != 100 {
		t.Errorf("balance %d, want 100", got)
	}
}

// When fn fails after a read that is already stale, it may have failed on
// a state that never was: it runs again, and its error is returned only
// from a run whose reads held.
func TestTransactErrorAfterStaleRead(t *testing.T) {
	ts := txServer(t, server.Config{})
	ts.MustWrite(insert, []*anypb.Any{account(ts, 1, 100)})
	boom := errors.New("boom")
	runs := 0
	err := ts.C.Transact(txContext(t), func(tx *client.Tx) error {
		runs++
		if _, err := tx.Get("bank.Account", 1); err != nil {
			return err
		}
		if runs == 1 {
			ts.MustWrite(update, []*anypb.Any{account(ts, 1, 7)})
		}
		return boom
	}, client.TxOptions{Backoff: time.Millisecond})
	if !errors.Is(err, boom) || runs != 2 {
		t.Fatalf("Transact = %v after %d runs; want boom after 2", err, runs)
	}
}

// A transaction that only reads commits a check of its reads: one that
// read a record changed before it ended runs again.
func TestTransactReadOnlyChecked(t *testing.T) {
	ts := txServer(t, server.Config{})
	ts.MustWrite(insert, []*anypb.Any{account(ts, 1, 100), account(ts, 2, 100)})
	runs := 0
	var total int64
	err := ts.C.Transact(txContext(t), func(tx *client.Tx) error {
		runs++
		a, err := tx.Get("bank.Account", 1)
		if err != nil {
			return err
		}
		if runs == 1 { // a transfer from 1 to 2 commits between the two reads
			ts.MustWrite(update, []*anypb.Any{account(ts, 1, 50), account(ts, 2, 150)})
		}
		b, err := tx.Get("bank.Account", 2)
		if err != nil {
			return err
		}
		total = intField(t, ts.C, a[0], "balance") + intField(t, ts.C, b[0], "balance")
		return nil
	}, client.TxOptions{Backoff: time.Millisecond})
	if err != nil || runs != 2 || total != 200 {
		t.Fatalf("Transact = %v after %d runs, total %d; want nil after 2 runs, total 200", err, runs, total)
	}
}

// Reads see the transaction's own writes: inserted, updated, patched
// (before and after the record was read) and removed records, through Get
// and through a lookup query; other queries see what is stored. The
// commit leaves what the reads showed.
func TestTransactReadYourWrites(t *testing.T) {
	for _, b := range versionBackends() {
		t.Run(b.name, func(t *testing.T) {
			ts := txServer(t, b.cfg(t))
			ts.MustWrite(insert, []*anypb.Any{account(ts, 1, 100), account(ts, 2, 100), account(ts, 3, 100)})
			bal := func(tx *client.Tx, id int64) int64 {
				t.Helper()
				recs, err := tx.Get("bank.Account", id)
				if err != nil {
					t.Fatalf("get %d: %v", id, err)
				}
				if recs[0] == nil {
					return -1
				}
				return intField(t, ts.C, recs[0], "balance")
			}
			add := []string{"balance"}
			err := ts.C.Transact(txContext(t), func(tx *client.Tx) error {
				must(t, tx.Insert(account(ts, 10, 7)))
				if got := bal(tx, 10); got != 7 {
					t.Errorf("inserted: %d, want 7", got)
				}
				must(t, tx.Update(account(ts, 1, 50)))
				if got := bal(tx, 1); got != 50 {
					t.Errorf("updated: %d, want 50", got)
				}
				must(t, tx.Patch(nil, add, account(ts, 2, 5))) // not read yet
				if got := bal(tx, 2); got != 105 {
					t.Errorf("patched, then read: %d, want 105", got)
				}
				must(t, tx.Patch(nil, add, account(ts, 2, 5), account(ts, 10, 1)))
				if got, got10 := bal(tx, 2), bal(tx, 10); got != 110 || got10 != 8 {
					t.Errorf("patched again: %d and %d, want 110 and 8", got, got10)
				}
				if err := tx.Patch([]string{"owner"}, nil, account(ts, 3, 0)); err == nil {
					t.Error("a patch of other fields than the transaction's first patch was accepted")
				}
				must(t, tx.Remove(account(ts, 3, 0)))
				if got := bal(tx, 3); got != -1 {
					t.Errorf("removed: read %d, want no record", got)
				}
				rs, err := tx.Search(
					&pb.Query{Type: "bank.Account", Where: client.Eq("id", 10)},
					&pb.Query{Type: "bank.Account", Where: client.Eq("id", 3)},
					&pb.Query{Type: "bank.Account"})
				if err != nil {
					return err
				}
				if len(rs[0]) != 1 || intField(t, ts.C, rs[0][0], "balance") != 8 || len(rs[1]) != 0 {
					t.Errorf("lookups: %d record(s) of id 10, %d of id 3; want the written 10 and no 3", len(rs[0]), len(rs[1]))
				}
				if len(rs[2]) != 3 {
					t.Errorf("a query of every account: %d records, want the 3 stored", len(rs[2]))
				}
				return nil
			}, client.TxOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := map[int64]int64{1: 50, 2: 110, 10: 8}
			if got := balances(t, ts); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("stored %v, want %v", got, want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A query that filled its limit conflicts when one of its records leaves
// it, even when a record from beyond the limit takes its place with the
// count and the highest version unchanged.
func TestTransactQueryLimitConflict(t *testing.T) {
	ts := txServer(t, server.Config{})
	ts.MustWrite(insert, []*anypb.Any{account(ts, 1, 1), account(ts, 2, 1), account(ts, 3, 1)}) // one version
	err := ts.C.Transact(txContext(t), func(tx *client.Tx) error {
		recs, err := tx.Query(&pb.Query{Type: "bank.Account", Limit: 2})
		if err != nil {
			return err
		}
		if len(recs) != 2 {
			t.Fatalf("%d records, want 2", len(recs))
		}
		ts.MustWrite(remove, []*anypb.Any{account(ts, 1, 0)})
		return tx.Insert(account(ts, 9, 1))
	}, client.TxOptions{MaxAttempts: 1})
	if !errors.Is(err, client.ErrAborted) {
		t.Fatalf("Transact = %v, want ABORTED", err)
	}
	if _, ok := balances(t, ts)[9]; ok {
		t.Error("the aborted transaction's insert applied")
	}
}

// A lookup of a missing key is a condition that the key stays absent: a
// concurrent insert of it aborts the transaction, whose error names the
// key's type and the version found.
func TestTransactLookupOfMissingKey(t *testing.T) {
	ts := txServer(t, server.Config{})
	var pos uint64
	err := ts.C.Transact(txContext(t), func(tx *client.Tx) error {
		rs, err := tx.Search(&pb.Query{Type: "bank.Account", Where: client.Eq("id", 42)})
		if err != nil {
			return err
		}
		if len(rs[0]) != 0 {
			t.Fatalf("%d records of id 42", len(rs[0]))
		}
		pos = ts.MustWrite(insert, []*anypb.Any{account(ts, 42, 1)}).Position
		return tx.Insert(account(ts, 43, 1))
	}, client.TxOptions{MaxAttempts: 1})
	var ce *client.Error
	if !errors.Is(err, client.ErrAborted) || !errors.As(err, &ce) || ce.Write == nil {
		t.Fatalf("Transact = %v, want ABORTED with a write detail", err)
	}
	if !strings.HasSuffix(ce.Write.TypeUrl, "bank.Account") || ce.Write.Version != pos {
		t.Errorf("detail names %s at version %d, want bank.Account at %d", ce.Write.TypeUrl, ce.Write.Version, pos)
	}
}

// A patch read back in its transaction is what the server stores at
// commit: nested paths, a field cleared, a message created, an add on
// either side absent, a double, a compound key.
func TestTransactReadsPatchAsStored(t *testing.T) {
	ts := startServer(t, server.Config{})
	ts.MustApply(map[string]string{"shop.proto": shopProto})
	order := func(js string) *anypb.Any { return ts.Rec("shop.Order", js) }
	ts.MustWrite(insert, []*anypb.Any{
		order(`{"user_id": 1, "id": 1, "total": 1.5, "line": {"sku": "a", "qty": 2}}`),
		order(`{"user_id": 1, "id": 2}`),
		order(`{"user_id": 1, "id": 3, "line": {"sku": "c"}}`),
	})
	keys := []any{[]any{1, 1}, map[string]any{"user_id": 1, "id": 2}, []any{1, 3}}
	var read []*anypb.Any
	err := ts.C.Transact(txContext(t), func(tx *client.Tx) error {
		err := tx.Patch([]string{"line.sku"}, []string{"line.qty", "total"},
			order(`{"user_id": 1, "id": 1, "total": 0.75, "line": {"qty": 3}}`),
			order(`{"user_id": 1, "id": 2, "line": {"sku": "b", "qty": -1}}`),
			order(`{"user_id": 1, "id": 3}`))
		if err != nil {
			return err
		}
		read, err = tx.Get("shop.Order", keys...)
		return err
	}, client.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := ts.C.Get(t.Context(), "shop.Order", keys...)
	if err != nil {
		t.Fatal(err)
	}
	types, err := ts.C.Types(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		r, err1 := types.JSON(read[i])
		s, err2 := types.JSON(stored[i])
		if err1 != nil || err2 != nil || string(r) != string(s) {
			t.Errorf("order %d: read %s in the transaction, stored %s (%v, %v)", i+1, r, s, err1, err2)
		}
	}
}
