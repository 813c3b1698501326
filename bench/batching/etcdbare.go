package batching

import (
	"context"
	"errors"
	"fmt"

	"github.com/protobase/protobase/bench"
)

// bareNote describes the rows bareRows adds.
const bareNote = "bare etcd rows: a plain etcd client (go.etcd.io/etcd/client/v3) in the lab's process reading the keys of the " +
	"loaded records in the lookups' order, one transaction of batch gets per request (one revision, linearizable, one round trip: " +
	"what a Search request of batch lookups promises, in the fewest requests a client can make for keys that are not adjacent); " +
	"servers=2: a second server on the same store, both answering the same lookups at once; clients=2: two bare clients at once; " +
	"the four rows run in turn, one run of each per round"

// etcdPeers are what the rows beside "lookup etcd" measure: a second
// server on the same store, two bare etcd clients, and the etcd keys of
// the loaded records, in id order.
type etcdPeers struct {
	peer *bench.Target
	bare []*bench.BareEtcd
	keys []string
}

// startPeers starts a second server on the store of t (the same records)
// and two bare etcd clients, and lists t's records' keys.
func (b *Experiment) startPeers(ctx context.Context, env *bench.Env, t *bench.Target) (*etcdPeers, error) {
	peer, err := env.Target(ctx, bench.TargetConfig{Etcd: *t.Etcd, EtcdSame: true})
	if err != nil {
		return nil, err
	}
	p := &etcdPeers{peer: peer}
	for range 2 {
		c, err := bench.OpenBareEtcd(env.Etcd)
		if err != nil {
			return nil, errors.Join(err, p.close())
		}
		p.bare = append(p.bare, c)
	}
	if p.keys, err = p.bare[0].RecordKeys(ctx, *t.Etcd, b.Records); err != nil {
		return nil, errors.Join(err, p.close())
	}
	return p, nil
}

// close closes the bare clients (the second server is the Env's to stop).
func (p *etcdPeers) close() error {
	var errs []error
	for _, c := range p.bare {
		errs = append(errs, c.Close())
	}
	p.bare = nil
	return errors.Join(errs...)
}

// etcdRows measures the lookups through t at batch ("lookup etcd")
// together with the rows that compare them with etcd itself, run in turn
// in every round (bench.Env.MeasureAlternately): a bare etcd client
// reading the same keys ("bare etcd"), the same lookups through t and
// through the second server at once ("lookup etcd servers=2"), and two
// bare clients at once ("bare etcd clients=2"). A note gives each ratio,
// server ÷ bare: the median of the rounds' ratios.
func (b *Experiment) etcdRows(ctx context.Context, env *bench.Env, t *bench.Target, p *etcdPeers,
	frames []bench.Frame, batch int, res *bench.Result) error {
	chk := bench.SearchCheck{Records: 1}
	modes := []string{"lookup etcd", "bare etcd", "lookup etcd servers=2", "bare etcd clients=2"}
	labels := make([]string, len(modes))
	for i, m := range modes {
		labels[i] = fmt.Sprintf("%s batch=%d", m, batch)
	}
	s, err := env.MeasureAlternately(ctx, labels, []bench.Workload{
		bench.AlternateSearch(t.API.Search, frames, batch, chk, &b.etcdCtr),
		p.bare[0].Lookups(p.keys, batch),
		bench.Together(
			bench.AlternateSearch(t.API.Search, frames, batch, chk, &b.etcdCtr),
			bench.AlternateSearch(p.peer.API.Search, frames, batch, chk, &b.peerCtr)),
		bench.Together(p.bare[0].Lookups(p.keys, batch), p.bare[1].Lookups(p.keys, batch)),
	})
	if err != nil {
		return err
	}
	for i, m := range modes {
		res.Rows = append(res.Rows, bench.NewRow(labels[i], map[string]any{"mode": m, "batch": batch}, "queries/s", s[i].Ops, nil))
	}
	one := bench.Summarize(bench.Ratios(s[0].Ops, s[1].Ops))
	two := bench.Summarize(bench.Ratios(s[2].Ops, s[3].Ops))
	res.Notes = append(res.Notes, fmt.Sprintf("batch=%d: lookups through the server on etcd %.2f of the bare etcd client (%.2f to %.2f); "+
		"two servers %.2f of two bare clients (%.2f to %.2f): medians of the rounds' ratios",
		batch, one.Median, one.Min, one.Max, two.Median, two.Min, two.Max))
	return nil
}
