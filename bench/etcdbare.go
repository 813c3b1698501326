package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/orderedcode"
	"github.com/protobase/protobase/server"
)

// The bare etcd client rows: what etcd itself does with the transactions
// and reads a Protobase server on it makes, measured in the same run on
// the same cluster, so that a row of the server divided by its bare row is
// the share of etcd's own rate the server reaches.

// BareEtcd is a plain etcd client (go.etcd.io/etcd/client/v3) of the
// lab's --store etcd cluster, with a fresh prefix of its own below the
// lab's, which Close deletes.
type BareEtcd struct {
	cli    *clientv3.Client
	cfg    server.EtcdConfig // its endpoints and its own prefix
	prefix string
}

// bareTypeID is the record type id of the keys the bare client writes: a
// small id, as a server's first types get, so that its keys are as long
// as the server's.
const bareTypeID = 2

// OpenBareEtcd connects a bare client to the cluster of e.
func OpenBareEtcd(e server.EtcdConfig) (*BareEtcd, error) {
	fresh, err := freshEtcdStore(e)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: fresh.Endpoints, DialTimeout: 5 * time.Second,
		MaxCallSendMsgSize: 1 << 30, MaxCallRecvMsgSize: 1 << 30, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("bare etcd client of %v: %w", e.Endpoints, err)
	}
	return &BareEtcd{cli: cli, cfg: fresh, prefix: fresh.Prefix}, nil
}

// Close deletes what the client wrote and closes it.
func (b *BareEtcd) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	err := server.DropEtcd(ctx, b.cfg)
	return errors.Join(err, b.cli.Close())
}

// recordKey is the etcd key of item id under the bare client's prefix,
// laid out as a server lays out a record's: prefix, record tag and type
// id, the primary key in ordered code.
func (b *BareEtcd) recordKey(dst []byte, id int64) []byte {
	dst = append(dst[:0], b.prefix...)
	return keyspace.AppendRecordKey(dst, bareTypeID, orderedcode.AppendInt(nil, id))
}

// Insert is the bare client's durable ingest without indexes: for d,
// transactions of batch items from nextID (the same record bytes as the
// server's inserts, keys of the same length), committed one after the
// other, each what an insert batch needs and nothing more: its puts, under
// one comparison that the batch's key range is still empty (so that an
// existing key fails it, as an insert must). A transaction is
// acknowledged once a quorum of members fsynced it, as a server's batch.
// The next transaction is built while one is in flight, as a server
// decodes the next batch of a stream while one commits: the etcd client's
// own work is what is left.
func (b *BareEtcd) Insert(batch int, nextID func(n int) int64) Workload {
	type txn struct {
		cmp     clientv3.Cmp
		ops     []clientv3.Op
		payload int64
	}
	build := func() txn {
		t := txn{ops: make([]clientv3.Op, batch)}
		first := nextID(batch)
		var key, val []byte
		for i := range t.ops {
			key = b.recordKey(key, first+int64(i))
			val = AppendItem(val[:0], first+int64(i))
			t.payload += int64(len(val))
			t.ops[i] = clientv3.OpPut(string(key), string(val))
		}
		lo := string(b.recordKey(key, first))
		hi := string(b.recordKey(key, first+int64(batch)-1)) + "\x00"
		t.cmp = clientv3.Compare(clientv3.CreateRevision(lo), "=", 0).WithRange(hi)
		return t
	}
	return func(ctx context.Context, d time.Duration) (Count, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		next := make(chan txn, 1)
		go func() {
			defer close(next)
			for {
				select {
				case next <- build():
				case <-ctx.Done():
					return
				}
			}
		}()
		var records, payload int64
		start := time.Now()
		for deadline := start.Add(d); time.Now().Before(deadline); {
			t := <-next
			resp, err := b.cli.Txn(ctx).If(t.cmp).Then(t.ops...).Commit()
			if err != nil {
				return Count{}, fmt.Errorf("bare etcd transaction of %d puts: %w", batch, err)
			}
			if !resp.Succeeded {
				return Count{}, fmt.Errorf("bare etcd transaction of %d puts: a key of the batch exists", batch)
			}
			records += int64(batch)
			payload += t.payload
		}
		return Count{Ops: records, Bytes: payload, Elapsed: time.Since(start)}, nil
	}
}

// RecordKeys returns the etcd keys of the n records of the one type a
// server on the etcd store cfg was loaded with (LoadItems: ids 0..n-1), in
// id order, which is their key order.
func (b *BareEtcd) RecordKeys(ctx context.Context, cfg server.EtcdConfig, n int) ([]string, error) {
	lo := cfg.Prefix + string([]byte{keyspace.TagRecord})
	resp, err := b.cli.Get(ctx, lo, clientv3.WithRange(clientv3.GetPrefixRangeEnd(lo)), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("list the loaded records' keys: %w", err)
	}
	if len(resp.Kvs) != n {
		return nil, fmt.Errorf("the server's store holds %d records, want the %d loaded", len(resp.Kvs), n)
	}
	keys := make([]string, n)
	for i, kv := range resp.Kvs {
		keys[i] = string(kv.Key)
	}
	return keys, nil
}

// Lookups is the bare client's batched lookups of keys (RecordKeys) in
// the order SearchFrames visits their ids: one transaction of batch gets
// per request, each request sent once the last was answered, as
// AlternateSearch does. A transaction of gets reads its keys at one
// revision, linearizably, in one round trip: what a Search request of
// batch lookups promises, at the fewest requests a client can make for
// keys that are not adjacent (a range read would read every key between
// them). It needs --max-txn-ops of at least batch on every member.
func (b *BareEtcd) Lookups(keys []string, batch int) Workload {
	stride := int64(7919)
	for gcd(stride, int64(len(keys))) != 1 {
		stride++
	}
	return func(ctx context.Context, d time.Duration) (Count, error) {
		var id, done int64
		ops := make([]clientv3.Op, batch)
		start := time.Now()
		for deadline := start.Add(d); time.Now().Before(deadline); {
			for i := range ops {
				ops[i] = clientv3.OpGet(keys[id])
				id = (id + stride) % int64(len(keys))
			}
			resp, err := b.cli.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				return Count{}, fmt.Errorf("bare etcd transaction of %d gets: %w", batch, err)
			}
			for _, r := range resp.Responses {
				if rr := r.GetResponseRange(); rr == nil || len(rr.Kvs) != 1 {
					return Count{}, errors.New("bare etcd get: a loaded key was not found")
				}
			}
			done += int64(batch)
		}
		return Count{Ops: done, Elapsed: time.Since(start)}, nil
	}
}

// Together runs ws at once, each for d, as one workload: its operations
// are theirs summed, over the longest of their times (two servers, or two
// bare clients, writing the same cluster concurrently).
func Together(ws ...Workload) Workload {
	return func(ctx context.Context, d time.Duration) (Count, error) {
		counts := make([]Count, len(ws))
		errs := make([]error, len(ws))
		var wg sync.WaitGroup
		for i, w := range ws {
			wg.Go(func() {
				start := time.Now()
				counts[i], errs[i] = w(ctx, d)
				if counts[i].Elapsed <= 0 {
					counts[i].Elapsed = time.Since(start)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return Count{}, err
		}
		var sum Count
		for _, c := range counts {
			sum.Ops += c.Ops
			sum.Bytes += c.Bytes
			sum.Elapsed = max(sum.Elapsed, c.Elapsed)
		}
		return sum, nil
	}
}
