// Package etcd implements the storage contract (internal/store's KV) on an
// etcd v3 cluster, so that several Protobase servers share one replicated
// store. Of the server's packages it is the only one that imports etcd's
// client.
//
// Mapping:
//   - Keys: every key of the store is the configured prefix (default
//     "/protobase/") followed by the store key; one cluster can hold several
//     stores under different prefixes.
//   - A WriteBatch is one etcd transaction: If(the preconditions read
//     through the batch) Then(its puts and deletes). A read that found a key
//     becomes ModRevision(key) == the revision read; a read that found none
//     becomes CreateRevision(key) == 0; an empty range read becomes
//     CreateRevision == 0 over the range. A failed comparison is
//     store.ErrConflict and nothing applies. A batch the cluster refuses as
//     too large (--max-txn-ops, --max-request-bytes) is store.ErrLimit: it is
//     never split, as a batch is atomic.
//   - A committed transaction is durable (a majority of members fsynced
//     it), so Wait returns at once; the batch's Position is the transaction's
//     revision.
//   - A request the cluster does not serve (no answer within the request
//     timeout, no connection, no leader) is attempted again until the
//     retry timeout (retry.go); a commit of unknown outcome is sent again
//     under a marker that lets at most one attempt apply and tells which
//     did (commit.go). Past the retry timeout a read, and a commit none
//     of whose attempts can have applied (never sent: sendWatch; refused
//     unapplied), is store.ErrUnavailable; a commit one of whose attempts
//     was sent and got no answer is store.ErrOutcomeUnknown. Every failed
//     attempt is counted and logged (faults.go).
//   - Split points (SplitKeys, split.go) come from key counts: etcd counts
//     a range from its in-memory index without reading values, and a few
//     transactions of count-only ranges find each cut.
//   - Snapshots and iterators read at one revision (WithRev). Reads of the
//     latest state are linearizable (etcd's default), so a read that starts
//     after a batch was acknowledged by any server sees it. A revision the
//     cluster has compacted away is store.ErrCompacted.
//   - The change feed (store.Feed, feed.go) is etcd's watch with previous
//     values: a feed revision is the etcd revision of the transaction, one
//     call per revision with its events in the batch's order, resumed
//     after a watch the cluster ends, and a start older than the cluster's
//     compaction is a store.CompactedError.
//
// Costs, unlike Pebble: every Get, Lookup and iterator page is a network
// round trip, and a descending iterator page makes etcd read and sort the
// whole remaining range (etcd limits ranges in ascending key order only).
package etcd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/protobase/protobase/internal/store"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "/protobase/"

// Defaults applied when the corresponding Options field is zero.
const (
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 30 * time.Second
	DefaultPageSize       = 1000
)

// Options configure Open.
type Options struct {
	// Endpoints are the cluster's client URLs or HOST:PORT pairs.
	Endpoints []string
	// Prefix starts every key (empty: DefaultPrefix).
	Prefix string
	// TLS, when set, is used to reach the members (CA, client certificate).
	TLS *tls.Config
	// Username and Password authenticate to a cluster with auth enabled.
	Username, Password string
	// DialTimeout bounds connecting (0: DefaultDialTimeout);
	// RequestTimeout bounds each attempt of a request (0:
	// DefaultRequestTimeout).
	DialTimeout, RequestTimeout time.Duration
	// RetryTimeout bounds how long a request the cluster does not serve
	// is attempted again: no attempt starts past it (0:
	// DefaultRetryTimeout; negative: one attempt only).
	RetryTimeout time.Duration
	// PageSize is the keys an iterator fetches per request (0:
	// DefaultPageSize).
	PageSize int
	// Logger receives a warning when requests fail because the cluster
	// does not answer, at most one line per kind every 10 s (nil: none).
	Logger *slog.Logger
}

// Store is a store.KV over an etcd cluster. It is safe for concurrent use.
// Its fields are immutable after Open, but for progressAt.
type Store struct {
	cli      *clientv3.Client
	prefix   string
	end      string // the first key after every key under prefix
	timeout  time.Duration
	pageSize int64
	ctx      context.Context // ended by Close: aborts requests in flight
	cancel   context.CancelFunc
	// progressAt is when (Unix ns) a change feed last asked the cluster for
	// a progress notification (feed.go).
	progressAt atomic.Int64
	// faults counts and logs the requests the cluster did not serve.
	faults faults
	// retryTimeout bounds the attempts of one request (retry.go);
	// retries counts them.
	retryTimeout time.Duration
	retries      retryCounts
	// slots are the commit markers' keys and batchIDs numbers the
	// batches they name (commit.go).
	slots    slots
	batchIDs atomic.Uint64
	// maxGets is the most gets Prefetch puts in one transaction, 0 until
	// the cluster refuses one as too large (prefetch.go).
	maxGets atomic.Int64
}

var _ store.KV = (*Store)(nil)

// Open connects to the cluster and checks that it answers.
func Open(o Options) (*Store, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("etcd store: no endpoints")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.RetryTimeout == 0 {
		o.RetryTimeout = DefaultRetryTimeout
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   o.Endpoints,
		DialTimeout: o.DialTimeout,
		TLS:         o.TLS,
		Username:    o.Username,
		Password:    o.Password,
		// The cluster's --max-request-bytes is the limit that applies, with
		// its own error; the client's default (2 MiB) would refuse first.
		MaxCallSendMsgSize: 1 << 30,
		// The client logs retries it handles itself; errors reach the
		// caller.
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithStatsHandler(sendWatch{})},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd store: connect to %v: %w", o.Endpoints, err)
	}
	s := &Store{cli: cli, prefix: o.Prefix, end: clientv3.GetPrefixRangeEnd(o.Prefix),
		timeout: o.RequestTimeout, pageSize: int64(o.PageSize), faults: faults{log: o.Logger}, retryTimeout: o.RetryTimeout}
	s.slots.base = s.Key([]byte(markerSpace)) + rand.Text() + "/"
	s.ctx, s.cancel = context.WithCancel(context.Background())
	ctx, cancel := context.WithTimeout(s.ctx, o.DialTimeout)
	defer cancel()
	if _, err := cli.Get(ctx, s.prefix, clientv3.WithCountOnly()); err != nil {
		s.Close()
		return nil, fmt.Errorf("etcd store: reach %v: %w", o.Endpoints, s.readErr(err))
	}
	return s, nil
}

// Client returns the store's etcd client, for the cluster services built on
// the same connection (watches, leases, elections).
func (s *Store) Client() *clientv3.Client { return s.cli }

// Prefix returns the prefix every key of the store starts with.
func (s *Store) Prefix() string { return s.prefix }

// Key returns the etcd key of a store key.
func (s *Store) Key(key []byte) string { return s.prefix + string(key) }

// Close ends requests in flight, deletes the store's commit markers and
// closes the connection.
func (s *Store) Close() error {
	s.cancel()
	s.dropSlots()
	if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("etcd store: close: %w", err)
	}
	return nil
}

// request returns the context of one request. It requires a leader: a
// member that knows it has none refuses the request at once (no leader,
// nothing applied) instead of holding it until an election is over, so
// the next attempt goes to another member.
func (s *Store) request() (context.Context, context.CancelFunc) {
	return context.WithTimeout(clientv3.WithRequireLeader(s.ctx), s.timeout)
}

// rangeEnd is the etcd key bounding [.., upper): the prefix's end when
// upper is nil.
func (s *Store) rangeEnd(upper []byte) string {
	if upper == nil {
		return s.end
	}
	return s.Key(upper)
}

// get reads key at rev (0: the latest, linearizable), returning the
// revision read at.
func (s *Store) get(key, dst []byte, rev int64) ([]byte, bool, *clientv3.GetResponse, error) {
	opts := []clientv3.OpOption{}
	if rev != 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	var resp *clientv3.GetResponse
	err := s.read(func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, s.Key(key), opts...)
		if err != nil {
			return fmt.Errorf("etcd store: get: %w", s.readErr(err))
		}
		return nil
	})
	if err != nil {
		return dst[:0], false, nil, err
	}
	if len(resp.Kvs) == 0 {
		return dst[:0], false, resp, nil
	}
	return append(dst[:0], resp.Kvs[0].Value...), true, resp, nil
}

// Get reads the latest value of key (a linearizable read).
func (s *Store) Get(key, dst []byte) ([]byte, bool, error) {
	v, found, _, err := s.get(key, dst, 0)
	return v, found, err
}

// GetVersioned is Get with the key's mod_revision as its version.
func (s *Store) GetVersioned(key, dst []byte) ([]byte, uint64, bool, error) {
	v, found, resp, err := s.get(key, dst, 0)
	return v, modRevision(resp, found), found, err
}

// modRevision returns the version of the key a get found: its
// mod_revision (0 when absent).
func modRevision(resp *clientv3.GetResponse, found bool) uint64 {
	if !found {
		return 0
	}
	return uint64(resp.Kvs[0].ModRevision)
}

// GetLikelyMissing is Get: etcd has no cheaper read for absent keys.
func (s *Store) GetLikelyMissing(key, dst []byte) ([]byte, bool, error) { return s.Get(key, dst) }

// NewIterator returns an iterator whose revision is fixed by its first read.
func (s *Store) NewIterator(lower, upper []byte) (store.Iterator, error) {
	return s.newIter(0, lower, upper), nil
}

// SyncWrites is true: a committed transaction is durable on a majority.
func (s *Store) SyncWrites() bool { return true }

// Flush does nothing: etcd persists every transaction.
func (s *Store) Flush() error { return nil }

// Compact does nothing: etcd's history compaction and defragmentation are
// the cluster operator's (etcdctl compact, defrag, --auto-compaction-*).
func (s *Store) Compact(context.Context) error { return nil }

// mapErr turns etcd's errors that the contract names into the contract's,
// with a message that says what to do; other errors pass as they are.
func mapErr(err error) error {
	if m, ok := refusal(err); ok {
		return m
	}
	return err
}

// refusal maps etcd's definite refusals that the contract names: nothing
// of the request was applied.
func refusal(err error) (error, bool) {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%w: etcd has compacted the revision this read started at (%w)", store.ErrCompacted, err), true
	case errors.Is(err, rpctypes.ErrTooManyOps):
		return fmt.Errorf("%w: the batch needs more operations in one etcd transaction than the cluster's --max-txn-ops "+
			"(default 128) allows: send smaller batches, or start every etcd member with a larger --max-txn-ops (%w)", store.ErrLimit, err), true
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		return fmt.Errorf("%w: the batch is larger than the cluster's --max-request-bytes (default 1.5 MiB): "+
			"send smaller batches, or start every etcd member with a larger --max-request-bytes (%w)", store.ErrLimit, err), true
	case errors.Is(err, rpctypes.ErrNoSpace):
		return fmt.Errorf("%w: etcd's backend quota is full (--quota-backend-bytes, 2 GiB by default): "+
			"compact and defragment the cluster, raise the quota, or remove data (%w)", store.ErrLimit, err), true
	case errors.Is(err, rpctypes.ErrTooManyRequests):
		// Refused before it was proposed: the member's applied index lags
		// its committed one too far.
		return fmt.Errorf("%w: etcd refused the request as too busy (%w)", store.ErrUnavailable, err), true
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.ResourceExhausted {
		// gRPC's own message size limit on the member: the request is over
		// --max-request-bytes plus gRPC's allowance.
		return fmt.Errorf("%w: the batch is larger than the cluster accepts in one request (--max-request-bytes, default 1.5 MiB): "+
			"send smaller batches, or start every etcd member with a larger --max-request-bytes (%w)", store.ErrLimit, err), true
	}
	return nil, false
}

// readErr maps the error of a read the store bounds with its own request
// timeout: on top of mapErr, a cluster that was not reached or did not
// answer is store.ErrUnavailable (a read changes nothing, so that is all
// there is to know).
func (s *Store) readErr(err error) error {
	if m, ok := refusal(err); ok {
		return s.faults.note(m)
	}
	if unanswered(err) || dropped(err) {
		return s.faults.note(fmt.Errorf("%w: %s (%w)", store.ErrUnavailable, s.noAnswer(err), err))
	}
	return err
}

// dropped reports whether err is Raft's refusal of a proposal it put in
// no log (a member without a leader, a leader handing over): etcd passes
// it on as it is, with no code of its own.
func dropped(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unknown && st.Message() == "raft proposal dropped"
}

// commitErr maps the error of a transaction that writes; sent says
// whether its request was handed to a connection (sendWatch). One that
// never was, or that a member refused before proposing it (no leader),
// applied nothing: store.ErrUnavailable. One that was sent and got no
// answer (past the request timeout, a connection lost, a leader change,
// the store closing) may have been applied, and may still be:
// store.ErrOutcomeUnknown.
func (s *Store) commitErr(err error, sent bool) error {
	if m, ok := refusal(err); ok {
		return s.faults.note(m)
	}
	lost := unanswered(err) || errors.Is(err, context.Canceled)
	switch {
	case lost && !sent:
		return s.faults.note(fmt.Errorf("%w: no connection to etcd was ready within the request timeout of %v: the batch was never sent (%w)",
			store.ErrUnavailable, s.timeout, err))
	case errors.Is(err, rpctypes.ErrNoLeader), dropped(err):
		return s.faults.note(fmt.Errorf("%w: etcd refused the batch unapplied (%w)", store.ErrUnavailable, err))
	case lost:
		return s.faults.note(fmt.Errorf("%w: the batch was sent and %s (%w)", store.ErrOutcomeUnknown, s.noAnswer(err), err))
	}
	return err
}

// unanswered reports whether err says that etcd did not answer: the
// request timeout passed, no connection, or a member's own "unavailable"
// (no leader, leader changed, request timed out, stopped, unhealthy).
func unanswered(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	st, ok := status.FromError(err)
	return ok && (st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded)
}

// noAnswer says why a request got no result, naming the timeout when it
// was the timeout (the error, in parentheses after it, says the rest).
func (s *Store) noAnswer(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("etcd did not answer within the request timeout of %v", s.timeout)
	}
	return "the request ended without a result from etcd"
}
