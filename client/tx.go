package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// TxOptions tune Transact. Zero values pick the defaults.
type TxOptions struct {
	// MaxAttempts is how many times Transact runs fn at most before it
	// gives up on a transaction that keeps conflicting (default 10).
	MaxAttempts int
	// Backoff is the longest pause before the second attempt (default
	// 5ms); it doubles at each attempt after that, up to MaxBackoff
	// (default 1s). Each pause is drawn uniformly below it, so that
	// transactions that conflicted once do not meet again in step.
	Backoff, MaxBackoff time.Duration
}

// The defaults of TxOptions.
const (
	DefaultTxAttempts   = 10
	DefaultTxBackoff    = 5 * time.Millisecond
	DefaultTxMaxBackoff = time.Second
)

func (o TxOptions) withDefaults() TxOptions {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultTxAttempts
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultTxBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultTxMaxBackoff
	}
	o.MaxBackoff = max(o.MaxBackoff, o.Backoff)
	return o
}

// pause is the jittered wait after the failed attempt n (1-based).
func (o TxOptions) pause(n int) time.Duration {
	d := o.Backoff
	for i := 1; i < n && d < o.MaxBackoff; i++ {
		d = min(2*d, o.MaxBackoff)
		if d <= 0 { // doubled past the largest duration
			d = o.MaxBackoff
		}
	}
	return time.Duration(rand.Int64N(int64(d) + 1)) //nolint:gosec // jitter, not a secret
}

// ErrAborted is what errors.Is finds in the error of a transaction that
// conflicted on every attempt (an *AbortedError).
var ErrAborted = errors.New("transaction aborted")

// AbortedError is Transact's error when every attempt's commit was
// aborted by a conflict. Err is the last attempt's: an *Error with code
// Aborted whose Write detail names the condition that failed and the
// version found (errors.As reaches it, and status.Code is Aborted).
type AbortedError struct {
	Attempts int
	Err      error
}

func (e *AbortedError) Error() string {
	return fmt.Sprintf("transaction aborted on all %d attempts: %v", e.Attempts, e.Err)
}

func (e *AbortedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrAborted) true.
func (e *AbortedError) Is(target error) bool { return target == ErrAborted }

// Transact runs fn as an optimistic transaction and commits what it
// wrote, running it again while the commit conflicts.
//
// fn reads through tx (Get, Query, Search) and writes through it (Insert,
// Update, Upsert, Remove, Patch). Each read is recorded: the version of
// every record read (0 for a key read and not found), and for each query
// the number of records it matched and the highest version among them.
// Writes are buffered in tx. When fn returns nil, Transact commits one
// write batch holding the writes, in the order made, with one condition
// per read: every record read is still at the version read, every query
// still matches as many records with the same highest version. The
// server checks the conditions and applies the writes atomically; if a
// condition fails nothing applies and the commit is ABORTED. Transact
// then waits a jittered, growing pause (TxOptions) and runs fn again on a
// new tx, which reads the current state. After MaxAttempts aborted
// commits it returns an *AbortedError. Any other error, from fn or from
// the commit, is returned at once without another attempt. A commit
// whose answer was lost (the connection broke) returns that error: the
// batch may or may not have applied, as with any write.
//
// A transaction that only read commits a batch of conditions alone: its
// reads are checked to have held together at one instant, which is what
// makes a read-only transaction serializable. One that neither read nor
// wrote sends nothing.
//
// When fn returns an error after reading, its reads are checked the same
// way first: if one is already stale, fn may have failed on a state that
// never existed at one instant, and it runs again instead (an attempt as
// any other); if they hold, fn's error is returned as it is.
//
// # Isolation
//
// A committed transaction is serializable with respect to what it read
// through tx: its reads held, all of them, at the instant its writes
// applied, so it is as if fn had run alone at that instant. Reads made
// outside tx (with the Client itself) are not covered. Writes to records
// the transaction did not read are blind: they apply to whatever is
// stored at commit (an Update of a record removed meanwhile fails with
// NOT_FOUND, not ABORTED).
//
// A run of fn that ends aborted may have seen records from different
// instants (each read is its own snapshot): fn must not act on what it
// read other than through tx, must tolerate odd states (a total that
// does not add up) without crashing, and must have no side effects
// outside tx, since it may run several times. Only the run that commits
// counts.
//
// Limits: the commit is one batch, so a transaction's writes and
// conditions together are bounded by the server's batch limits (records
// per batch, message bytes, conditions per batch; docs/limits.md). A
// query condition runs its query again at commit, bounded in matches:
// read small, well-indexed ranges. On etcd a query condition conflicts
// more coarsely (a write to its type may abort it even when the query's
// matches did not change), which costs a retry, never a lost conflict.
//
// # Reading your own writes
//
// Get, and a query that names one primary key (see Tx.Search), return
// what the transaction's own writes leave: the record it inserted,
// updated, upserted or patched, none for one it removed. A patch of a
// record not read yet is read then and applied in the client. Other
// queries return what is stored: they do not see the transaction's
// buffered writes, since the client cannot evaluate them.
func (c *Client) Transact(ctx context.Context, fn func(tx *Tx) error, opts TxOptions) error {
	opts = opts.withDefaults()
	for attempt := 1; ; attempt++ {
		tx := &Tx{c: c, ctx: ctx, attempt: attempt, recs: map[string]*txRecord{}, queries: map[string]bool{}}
		conflict, err := tx.run(fn)
		if !conflict {
			return err
		}
		if attempt >= opts.MaxAttempts {
			return &AbortedError{Attempts: attempt, Err: err}
		}
		t := time.NewTimer(opts.pause(attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("transaction after %d aborted attempts: %w", attempt, ctx.Err())
		}
	}
}

// isAborted reports whether err is the server's ABORTED: a condition of
// the batch failed.
func isAborted(err error) bool {
	var ce *Error
	return errors.As(err, &ce) && ce.Status.Code() == codes.Aborted
}

// Tx is one attempt of a transaction: what fn read and wrote through it.
// It is valid only during the call of fn that received it, and not safe
// for concurrent use.
type Tx struct {
	c       *Client
	ctx     context.Context
	attempt int
	ended   bool

	recs    map[string]*txRecord // by recKey.id
	conds   []*pb.Condition
	queries map[string]bool // the query conditions recorded, by their encoding
	writes  []*anypb.Any
	ops     []Op
	// fields and add are the patch of the transaction's Patch writes
	// (a batch has one); patched says there is one.
	fields, add []string
	patched     bool
}

// txRecord is what a transaction knows of one record.
type txRecord struct {
	rk recKey
	// read says the stored record was read: stored (nil when there was
	// none) at version.
	read    bool
	stored  *anypb.Any
	version uint64
	cond    bool // a key condition names the record
	// wrote says the transaction wrote the record. When known, value is
	// what its writes leave (nil: no record), and fromStored says value
	// was computed from the stored record (a patch of what was read);
	// otherwise patches holds patches of a stored record not read yet.
	wrote, known, fromStored bool
	value                    *anypb.Any
	patches                  []*anypb.Any
}

// Attempt is the number of this run of fn: 1 for the first.
func (tx *Tx) Attempt() int { return tx.attempt }

// run runs fn and commits; conflict says the attempt lost to a
// concurrent write and may run again.
func (tx *Tx) run(fn func(tx *Tx) error) (conflict bool, err error) {
	ferr := fn(tx)
	tx.ended = true
	if ferr != nil {
		if len(tx.conds) == 0 || tx.ctx.Err() != nil {
			return false, ferr
		}
		if cerr := tx.c.check(tx.ctx, tx.conds); isAborted(cerr) {
			return true, cerr
		}
		return false, ferr
	}
	err = tx.commit()
	return isAborted(err), err
}

// check commits a batch of conditions alone.
func (c *Client) check(ctx context.Context, conds []*pb.Condition) error {
	_, err := c.Apply(ctx, Batch{Op: Update, Conditions: conds})
	return err
}

// commit sends the transaction's one batch.
func (tx *Tx) commit() error {
	if len(tx.writes) == 0 {
		if len(tx.conds) == 0 {
			return nil
		}
		return tx.c.check(tx.ctx, tx.conds)
	}
	b := Batch{Op: tx.ops[0], Records: make([]proto.Message, len(tx.writes)), Conditions: tx.conds}
	for i, a := range tx.writes {
		b.Records[i] = a
	}
	for _, op := range tx.ops {
		if op != b.Op {
			b.Ops = tx.ops
			break
		}
	}
	if tx.patched {
		// A batch's operation is ignored beside per-record ones, but the
		// patch is a Patch batch's.
		b.Op, b.Fields, b.Add = Patch, tx.fields, tx.add
	}
	_, err := tx.c.Apply(tx.ctx, b)
	return err
}

// usable refuses a Tx used after its run of fn.
func (tx *Tx) usable() error {
	if tx.ended {
		return errors.New("transaction: tx used after its function returned")
	}
	return nil
}

// record returns what the transaction knows of the record rk, adding an
// empty entry the first time.
func (tx *Tx) record(rk recKey) *txRecord {
	r := tx.recs[rk.id]
	if r == nil {
		r = &txRecord{rk: rk}
		tx.recs[rk.id] = r
	}
	return r
}

// keyCondition records that the transaction depends on r being at
// version, once per record.
func (tx *Tx) keyCondition(r *txRecord, version uint64) {
	if r.cond {
		return
	}
	r.cond = true
	tx.conds = append(tx.conds, IfKey(r.rk.key, version))
}

// Insert buffers inserts of recs (generated messages, dynamic ones, or
// *anypb.Any records as they are).
func (tx *Tx) Insert(recs ...proto.Message) error { return tx.write(Insert, nil, nil, recs) }

// Update buffers updates of recs.
func (tx *Tx) Update(recs ...proto.Message) error { return tx.write(Update, nil, nil, recs) }

// Upsert buffers upserts of recs.
func (tx *Tx) Upsert(recs ...proto.Message) error { return tx.write(Upsert, nil, nil, recs) }

// Remove buffers removals of the records whose primary keys recs hold
// (their other fields are ignored).
func (tx *Tx) Remove(recs ...proto.Message) error { return tx.write(Remove, nil, nil, recs) }

// Patch buffers patches of the stored records with recs' primary keys:
// each field path of fields takes the value rec holds (cleared when it
// holds none), each numeric field of add has rec's value added to the
// stored one, and every other stored field stays (docs/concurrency.md).
// A record that does not exist at commit fails it with NOT_FOUND. The
// commit is one batch, which carries one patch: every Patch of a
// transaction names the same fields and the same add (in any order), and
// a Patch naming others is an error (patch those records with Update
// after reading them).
func (tx *Tx) Patch(fields, add []string, recs ...proto.Message) error {
	return tx.write(Patch, fields, add, recs)
}

// write buffers recs under op: all of them, or on an error none.
func (tx *Tx) write(op Op, fields, add []string, recs []proto.Message) error {
	if err := tx.usable(); err != nil {
		return err
	}
	if op == Patch {
		if err := tx.samePatch(fields, add); err != nil {
			return err
		}
	}
	next := map[string]*txRecord{} // the entries as this call leaves them
	anys := make([]*anypb.Any, len(recs))
	for i, m := range recs {
		a, err := anyOf(m)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		t, err := tx.c.recordTypes(tx.ctx, typeName(a.GetTypeUrl()))
		if err != nil {
			return err
		}
		_, rk, err := t.recordKey(a)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		r, ok := next[rk.id]
		if !ok {
			r = tx.record(rk).clone()
			next[rk.id] = r
		}
		if err := r.write(t, op, a, fields, add); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		anys[i] = a
	}
	for id, r := range next {
		tx.recs[id] = r
	}
	for _, a := range anys {
		tx.writes = append(tx.writes, a)
		tx.ops = append(tx.ops, op)
	}
	if op == Patch && !tx.patched {
		tx.fields, tx.add, tx.patched = fields, add, true
	}
	return nil
}

// samePatch refuses a patch other than the transaction's earlier ones.
func (tx *Tx) samePatch(fields, add []string) error {
	if !tx.patched || (sameSet(fields, tx.fields) && sameSet(add, tx.add)) {
		return nil
	}
	return fmt.Errorf("transaction: a commit carries one patch, and this one (fields %q, add %q) differs from the first (fields %q, add %q): patch those records with Update after reading them",
		fields, add, tx.fields, tx.add)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func (r *txRecord) clone() *txRecord {
	c := *r
	c.patches = slices.Clip(c.patches) // an append copies
	return &c
}

// write notes what a write of a leaves of r.
func (r *txRecord) write(t *Types, op Op, a *anypb.Any, fields, add []string) error {
	if op != Patch {
		r.wrote, r.known, r.fromStored, r.patches = true, true, false, nil
		r.value = a
		if op == Remove {
			r.value = nil
		}
		return nil
	}
	switch {
	case r.wrote && !r.known:
		r.patches = append(r.patches, a)
		return nil
	case !r.wrote && !r.read:
		r.wrote, r.patches = true, []*anypb.Any{a}
		return nil
	case !r.wrote:
		r.value, r.fromStored = r.stored, true
	}
	v, err := t.applyPatch(r.value, a, fields, add)
	if err != nil {
		return err
	}
	r.wrote, r.known, r.value = true, true, v
	return nil
}
