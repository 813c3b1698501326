package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/server"
)

// etcdRows measures the server t on etcd without indexes at batch (the
// row label, with params) together with the rows that compare it with
// etcd itself, run in turn in every round (bench.Env.MeasureAlternately):
// a bare etcd client sending the same transactions ("bare etcd"), two
// servers on the cluster inserting at once, each into its own prefix
// ("servers=2"), and two bare clients at once ("bare etcd clients=2"). A
// note gives each ratio, server ÷ bare: the median of the rounds' ratios.
func (g *Experiment) etcdRows(ctx context.Context, env *bench.Env, t *bench.Target, label string, params map[string]any, batch int, res *bench.Result) error {
	if err := g.startBare(ctx, env, res); err != nil {
		return err
	}
	nextID := func(n int) int64 { return g.nextID.Add(int64(n)) - int64(n) }
	configs := []string{"bare etcd", "indexes=0 store=etcd servers=2", "bare etcd clients=2"}
	labels := []string{label}
	for _, c := range configs {
		labels = append(labels, fmt.Sprintf("%s batch=%d", c, batch))
	}
	s, err := env.MeasureAlternately(ctx, labels, []bench.Workload{
		g.workload(t, bench.ItemType, batch),
		g.bare[0].Insert(batch, nextID),
		bench.Together(g.workload(t, bench.ItemType, batch), g.workload(g.peer, bench.ItemType, batch)),
		bench.Together(g.bare[0].Insert(batch, nextID), g.bare[1].Insert(batch, nextID)),
	})
	if err != nil {
		return err
	}
	addRows(res, label, params, s[0])
	for i, c := range configs {
		servers := 2
		if i == 0 {
			servers = 1
		}
		p := map[string]any{"batch": batch, "indexes": 0, "config": c, "store": server.StoreEtcd, "servers": servers}
		res.Rows = append(res.Rows, bench.NewRow(labels[i+1], p, "records/s", s[i+1].Ops, nil))
	}
	one := bench.Summarize(bench.Ratios(s[0].Ops, s[1].Ops))
	two := bench.Summarize(bench.Ratios(s[2].Ops, s[3].Ops))
	res.Notes = append(res.Notes, fmt.Sprintf("batch=%d, indexes=0: the server on etcd %.2f of the bare etcd client (%.2f to %.2f); "+
		"two servers %.2f of two bare clients (%.2f to %.2f): medians of the rounds' ratios",
		batch, one.Median, one.Min, one.Max, two.Median, two.Min, two.Max))
	return nil
}

// startBare starts the second server on the etcd cluster and the two bare
// clients, once.
func (g *Experiment) startBare(ctx context.Context, env *bench.Env, res *bench.Result) error {
	if g.peer != nil {
		return nil
	}
	peer, err := env.Target(ctx, bench.TargetConfig{Etcd: env.Etcd})
	if err != nil {
		return err
	}
	if err := peer.EnsureSchema(ctx, bench.ItemSchema()); err != nil {
		return err
	}
	g.peer = peer
	for range 2 {
		b, err := bench.OpenBareEtcd(env.Etcd)
		if err != nil {
			return err
		}
		g.bare = append(g.bare, b)
	}
	res.Notes = append(res.Notes, "bare etcd rows: a plain etcd client (go.etcd.io/etcd/client/v3) in the lab's process, under a prefix of its own, "+
		"committing one transaction per batch, one after the other (the next built while one is in flight): the batch's puts "+
		"(the same record bytes, keys of the same length) under one comparison that their key range is empty, what an insert needs; "+
		"servers=2 and clients=2: two of them at once, each its own prefix; the four rows run in turn, one run of each per round")
	return nil
}

// closeBare closes the bare clients, deleting what they wrote (the
// second server is the Env's to stop).
func (g *Experiment) closeBare() error {
	var errs []error
	for _, b := range g.bare {
		errs = append(errs, b.Close())
	}
	g.bare = nil
	return errors.Join(errs...)
}
