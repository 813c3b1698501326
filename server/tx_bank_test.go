package server_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/store/etcd/etcdtest"
	"github.com/protobase/protobase/server"
	"github.com/protobase/protobase/server/servertest"
	"github.com/protobase/protobase/tests/robustness/harness"
)

// txServers starts the servers a concurrent transaction test spreads its
// clients over: one on Pebble, or two sharing one etcd store.
func txServers(t *testing.T, store string) []*testServer {
	t.Helper()
	if store == "pebble" {
		return []*testServer{txServer(t, server.Config{})}
	}
	cfg := server.Config{Store: server.StoreEtcd, Etcd: server.EtcdConfig{
		Endpoints: []string{etcdtest.Start(t, etcdtest.Roomy)}, Prefix: "/tx/"}}
	a := txServer(t, withDir(t, cfg))
	return []*testServer{a, startServer(t, withDir(t, cfg))}
}

const (
	bankAccounts = 20
	bankClients  = 16
	bankInitial  = 1000
)

// transfer is one committed transfer, as its client saw it.
type transfer struct {
	id            string
	from, to, amt int64
}

// The bank: 16 clients move random amounts between 20 accounts in
// transactions (read both balances, refuse an overdraft, write both
// balances, by Update or by Patch, and insert a transfer record with a
// unique id), while an auditor sums every balance in read-only
// transactions. Money is conserved, no balance goes negative, the auditor
// never commits a wrong total, and the transfer records are exactly the
// transfers the clients saw commit, which explain every balance.
// -seed=N replays a run's choices (the interleaving is the scheduler's).
func TestTransactBank(t *testing.T) {
	run := 10 * time.Second
	if testing.Short() {
		run = 2 * time.Second
	}
	for _, store := range []string{"pebble", "etcd"} {
		t.Run(store, func(t *testing.T) {
			for _, seed := range harness.Seeds(t, 31) {
				t.Logf("seed %d", seed)
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("seed %d failed (replay: %s)", seed, harness.Replay("server", t.Name(), seed))
					}
				})
				runBank(t, txServers(t, store), seed, run)
			}
		})
	}
}

// bankStats counts what the bank's transactions did.
type bankStats struct {
	attempts, gaveUp, overdrafts, audits atomic.Int64
}

func runBank(t *testing.T, servers []*testServer, seed uint64, run time.Duration) {
	ts := servers[0]
	var seedRecs []*anypb.Any
	for id := range int64(bankAccounts) {
		seedRecs = append(seedRecs, account(ts, id, bankInitial))
	}
	ts.MustWrite(insert, seedRecs)
	ctx, cancel := context.WithTimeout(context.Background(), run+time.Minute)
	defer cancel()
	deadline := time.Now().Add(run)
	var stats bankStats
	var wg sync.WaitGroup
	committed := make([][]transfer, bankClients)
	errs := make(chan error, bankClients+1)
	for cl := range bankClients {
		srv := servers[cl%len(servers)]
		rng := rand.New(rand.NewPCG(seed, uint64(cl)))
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline); n++ {
				tr, err := bankTransfer(ctx, srv, rng, fmt.Sprintf("c%d-%d", cl, n), &stats)
				switch {
				case errors.Is(err, client.ErrAborted):
					stats.gaveUp.Add(1)
				case err != nil:
					errs <- fmt.Errorf("client %d: %w", cl, err)
					return
				case tr != nil:
					committed[cl] = append(committed[cl], *tr)
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; time.Now().Before(deadline); i++ {
			if err := bankAudit(ctx, servers[i%len(servers)], i%2 == 0, &stats); err != nil && !errors.Is(err, client.ErrAborted) {
				errs <- fmt.Errorf("audit: %w", err)
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var all []transfer
	for _, c := range committed {
		all = append(all, c...)
	}
	t.Logf("%d transfers committed in %v (%d attempts, %d gave up, %d refused overdrafts), %d audits",
		len(all), run, stats.attempts.Load(), stats.gaveUp.Load(), stats.overdrafts.Load(), stats.audits.Load())
	if len(all) == 0 {
		t.Error("no transfer committed")
	}
	checkBank(t, ts, all)
}

// bankTransfer moves a random amount between two random accounts in one
// transaction; it returns the transfer when one committed, nil when the
// source could not cover it.
func bankTransfer(ctx context.Context, ts *testServer, rng *rand.Rand, id string, stats *bankStats) (*transfer, error) {
	from := rng.Int64N(bankAccounts)
	to := (from + 1 + rng.Int64N(bankAccounts-1)) % bankAccounts
	tr := transfer{id: id, from: from, to: to, amt: 1 + rng.Int64N(bankInitial/2)}
	patch := rng.IntN(2) == 0
	var moved bool
	err := ts.C.Transact(ctx, func(tx *client.Tx) error {
		stats.attempts.Add(1)
		moved = false
		recs, err := tx.Get("bank.Account", tr.from, tr.to)
		if err != nil {
			return err
		}
		fromBal, err := decodeInt(ts.C, recs[0], "balance")
		if err != nil {
			return err
		}
		toBal, err := decodeInt(ts.C, recs[1], "balance")
		if err != nil {
			return err
		}
		if fromBal < tr.amt {
			return nil // commits as a check of the two reads
		}
		if patch {
			err = tx.Patch(nil, []string{"balance"}, account(ts, tr.from, -tr.amt), account(ts, tr.to, tr.amt))
		} else {
			err = tx.Update(account(ts, tr.from, fromBal-tr.amt), account(ts, tr.to, toBal+tr.amt))
		}
		if err != nil {
			return err
		}
		moved = true
		return tx.Insert(ts.Rec("bank.Transfer", fmt.Sprintf(`{"id": %q, "from": %d, "to": %d, "amount": %d}`,
			tr.id, tr.from, tr.to, tr.amt)))
	}, client.TxOptions{MaxAttempts: 50, MaxBackoff: 100 * time.Millisecond})
	if err != nil || !moved {
		if err == nil {
			stats.overdrafts.Add(1)
		}
		return nil, err
	}
	return &tr, nil
}

// bankAudit sums every balance in a read-only transaction, through a
// query or through lookups, and fails on a total other than the money
// put in or a negative balance. Transact returns that failure only from a
// run whose reads held together at one instant.
func bankAudit(ctx context.Context, ts *testServer, byQuery bool, stats *bankStats) error {
	return ts.C.Transact(ctx, func(tx *client.Tx) error {
		var recs []*anypb.Any
		var err error
		if byQuery {
			recs, err = tx.Query(&pb.Query{Type: "bank.Account"})
		} else {
			ids := make([]any, bankAccounts)
			for i := range ids {
				ids[i] = i
			}
			recs, err = tx.Get("bank.Account", ids...)
		}
		if err != nil {
			return err
		}
		var total int64
		for _, r := range recs {
			b, err := decodeInt(ts.C, r, "balance")
			if err != nil {
				return err
			}
			if b < 0 {
				return fmt.Errorf("a balance of %d", b)
			}
			total += b
		}
		if len(recs) != bankAccounts || total != bankAccounts*bankInitial {
			return fmt.Errorf("%d accounts holding %d in all, want %d holding %d", len(recs), total, bankAccounts, bankAccounts*bankInitial)
		}
		stats.audits.Add(1)
		return nil
	}, client.TxOptions{MaxAttempts: 20, MaxBackoff: 100 * time.Millisecond})
}

// checkBank checks the stored accounts and transfers against the
// transfers the clients saw commit.
func checkBank(t *testing.T, ts *testServer, all []transfer) {
	t.Helper()
	want := map[int64]int64{}
	for id := range int64(bankAccounts) {
		want[id] = bankInitial
	}
	seen := map[string]transfer{}
	for _, tr := range all {
		want[tr.from] -= tr.amt
		want[tr.to] += tr.amt
		seen[tr.id] = tr
	}
	got := balances(t, ts)
	var total int64
	for id, b := range got {
		total += b
		if b < 0 {
			t.Errorf("account %d: balance %d", id, b)
		}
		if b != want[id] {
			t.Errorf("account %d: balance %d, the committed transfers make it %d", id, b, want[id])
		}
	}
	if total != bankAccounts*bankInitial || len(got) != bankAccounts {
		t.Errorf("%d accounts hold %d, want %d holding %d", len(got), total, bankAccounts, bankAccounts*bankInitial)
	}
	stored := ts.Records("bank.Transfer")
	if len(stored) != len(all) {
		t.Errorf("%d transfer records stored, %d transfers committed", len(stored), len(all))
	}
	for _, m := range stored {
		id := servertest.FieldValue(m, "id").String()
		tr, ok := seen[id]
		if !ok {
			t.Errorf("transfer %s is stored but its transaction did not commit", id)
			continue
		}
		if got := servertest.FieldValue(m, "amount").Int(); got != tr.amt {
			t.Errorf("transfer %s: amount %d stored, %d committed", id, got, tr.amt)
		}
	}
}

// The counter: 16 clients each add 1 to one counter by reading it and
// updating it in a transaction, 1,000 times each on Pebble; the counter
// ends at exactly the number of increments. On etcd, two servers share
// the store and each client increments 100 times: every increment of
// one counter conflicts with all the others in flight, and an etcd
// commit takes a Raft round, so 16,000 would take minutes there.
func TestTransactCounter(t *testing.T) {
	for _, tc := range []struct {
		store string
		each  int
	}{{"pebble", 1000}, {"etcd", 100}} {
		t.Run(tc.store, func(t *testing.T) {
			each := tc.each
			if testing.Short() {
				each /= 10
			}
			servers := txServers(t, tc.store)
			ts := servers[0]
			ts.MustWrite(insert, []*anypb.Any{ts.Rec("bank.Counter", `{"name": "hits"}`)})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var attempts atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, bankClients)
			for cl := range bankClients {
				srv := servers[cl%len(servers)]
				wg.Go(func() {
					for range each {
						if err := increment(ctx, srv, &attempts); err != nil {
							errs <- fmt.Errorf("client %d: %w", cl, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			recs := ts.Records("bank.Counter")
			if want := int64(bankClients * each); len(recs) != 1 || servertest.FieldValue(recs[0], "value").Int() != want {
				t.Fatalf("counter %v, want %d", recs, want)
			}
			t.Logf("%d increments in %d attempts", bankClients*each, attempts.Load())
		})
	}
}

func increment(ctx context.Context, ts *testServer, attempts *atomic.Int64) error {
	return ts.C.Transact(ctx, func(tx *client.Tx) error {
		attempts.Add(1)
		recs, err := tx.Get("bank.Counter", "hits")
		if err != nil {
			return err
		}
		v, err := decodeInt(ts.C, recs[0], "value")
		if err != nil {
			return err
		}
		return tx.Update(ts.Rec("bank.Counter", fmt.Sprintf(`{"name": "hits", "value": %d}`, v+1)))
	}, client.TxOptions{MaxAttempts: 1000, MaxBackoff: 20 * time.Millisecond})
}
