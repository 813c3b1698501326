package engine

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/store"
)

// A write batch's conditions (Batch.Conditions): what must hold, in the
// state the batch starts from, for the batch to apply.
//
// Phase 1 (compileConditions, at the end of prepare, against the catalog
// the batch's records are prepared in) resolves each condition's target
// to a record key (one of the batch's records, or a key record) or to a
// query plan, and compiles its filter. Every malformed condition is
// INVALID_ARGUMENT naming it, before anything is read.
//
// Phase 2 (checkConditions, in commit under writeMu, before build) reads
// what the conditions name in the state before the batch's writes. A
// failed condition is ABORTED naming it and the version found, and the
// batch applies nothing. Phase 2 runs again on every re-check after a
// conflict (commitLocked), so a condition is always judged on the reads
// the batch finally commits on.
//
// Atomicity. On a store that is not shared, writeMu makes the check and
// the apply one step: no other batch applies between them. On a shared
// store (etcd) the conditions are read on one snapshot and each becomes a
// precondition of the batch's transaction: a record's version through
// WriteBatch.Expect, and a query's answer through its type's write mark
// (keyspace.WrittenPrefix), which every batch that writes the type
// rewrites (markTypes). The mark is read on the query's snapshot, so a
// batch that wrote the type before the snapshot is in the answer and one
// after it has moved the mark. A query condition on etcd thus conflicts
// with any write to its type since it was read, whether or not the write
// changed its answer: coarser than on Pebble, where only a changed answer
// fails it. A false conflict costs a re-check on fresh reads, after which
// the condition holds or fails on its merits; past maxConflicts re-checks
// the batch is ABORTED, which a client retries as any failed condition.
//
// A batch with conditions and no records is a pure check: it writes
// nothing, and succeeds or fails as a batch with records would. On a
// shared store its conditions held together at its snapshot's revision.

// condTarget is what a condition is on.
type condTarget uint8

const (
	onRecord condTarget = iota + 1 // one of the batch's records
	onKey                          // any record, by its primary key
	onQuery                        // the matches of a query
)

// cond is one compiled condition.
type cond struct {
	on     condTarget
	t      *recType
	record int // onRecord: the record's index in the batch
	// key is, in conditions.keys, the record key (onRecord, onKey) or the
	// type's write mark (onQuery).
	key span
	// Record and key checks: the version (when hasVersion) and filter.
	version    uint64
	hasVersion bool
	filter     *query.Filter
	// Query checks: the count and highest version (when hasCount,
	// hasMax) of the matches of q, whose plan hands the check every
	// record of its ranges: the check applies match (the plan's residual
	// filter) and limit itself.
	count, maxVersion uint64
	hasCount, hasMax  bool
	q                 *compiled
	match             *query.Filter
	limit             uint64
}

// conditions is a Writer's compiled conditions of the batch it applies,
// and the scratch their checks reuse from batch to batch.
type conditions struct {
	list []cond
	keys []byte
	// ctx is the Apply call's: query conditions read under it.
	ctx context.Context
	// reads counts the records the batch's query conditions read.
	reads int
	buf   []byte
	fetch [][]byte
	// marked and mark are markTypes' scratch.
	marked []uint32
	mark   []byte
	// The last filter compiled: conditions that repeat a filter (one per
	// record a transaction read with it) share it.
	lastT      *recType
	lastText   string
	lastFilter *query.Filter
}

// forget drops the references into the batch applied and its catalog.
func (cs *conditions) forget() {
	clear(cs.list)
	cs.list = cs.list[:0]
	clear(cs.fetch)
	cs.ctx, cs.lastT, cs.lastFilter = nil, nil, nil
}

func (cs *conditions) bytes(s span) []byte { return cs.keys[s.s:s.e] }

// compileConditions is phase 1 of the batch's conditions, against cat,
// after its records are prepared (a record condition names one).
func (w *Writer) compileConditions(cat *catalog) error {
	cs := &w.conds
	clear(cs.list)
	cs.list, cs.keys = cs.list[:0], cs.keys[:0]
	cs.lastT, cs.lastFilter = nil, nil
	conds := w.batch.Conditions
	if len(conds) == 0 {
		return nil
	}
	if max := w.e.opts.MaxConditionsPerBatch; len(conds) > max {
		return condError(apierror.ResourceExhausted, max, "", "",
			"batch holds "+itoa(len(conds))+" conditions, more than the limit of "+itoa(max))
	}
	for i, c := range conds {
		cd, err := w.compileCondition(cat, i, c)
		if err != nil {
			return err
		}
		cs.list = append(cs.list, cd)
	}
	return nil
}

// compileCondition compiles condition i.
func (w *Writer) compileCondition(cat *catalog, i int, c *pb.Condition) (cond, error) {
	if c == nil {
		return cond{}, condError(apierror.InvalidArgument, i, "", "", "condition is null")
	}
	var cd cond
	var err error
	switch tg := c.GetTarget().(type) {
	case *pb.Condition_Record:
		err = w.recordTarget(&cd, i, tg.Record)
	case *pb.Condition_Key:
		err = w.keyTarget(cat, &cd, i, tg.Key)
	case *pb.Condition_Query:
		return w.queryCondition(cat, i, c, tg.Query)
	default:
		return cond{}, condError(apierror.InvalidArgument, i, "", "target", "condition names no target: set record, key or query")
	}
	if err != nil {
		return cond{}, err
	}
	return cd, w.recordChecks(cat, &cd, i, c)
}

// recordTarget resolves a condition on record r of the batch.
func (w *Writer) recordTarget(cd *cond, i int, r uint32) error {
	if int64(r) >= int64(len(w.preps)) {
		return condError(apierror.InvalidArgument, i, "", "record",
			"record "+strconv.FormatUint(uint64(r), 10)+" is out of range: the batch holds "+itoa(len(w.preps))+" records")
	}
	p := &w.preps[r]
	cs := &w.conds
	start := len(cs.keys)
	cs.keys = append(cs.keys, w.bytes(p.key)...)
	*cd = cond{on: onRecord, t: p.t, record: int(r), key: span{int32(start), int32(len(cs.keys))}}
	return nil
}

// keyTarget resolves a condition on the record with the primary key of
// the key record k.
func (w *Writer) keyTarget(cat *catalog, cd *cond, i int, k *anypb.Any) error {
	if k == nil {
		return condError(apierror.InvalidArgument, i, "", "key", "key record is null")
	}
	t := cat.lookup(k.GetTypeUrl())
	if t == nil || k.GetTypeUrl() == "" {
		return condError(apierror.InvalidArgument, i, k.GetTypeUrl(), "key",
			"unknown type URL "+quote(k.GetTypeUrl())+": no record type of that name in the schema")
	}
	cs := &w.conds
	start := len(cs.keys)
	cs.keys = append(cs.keys, t.prefix...)
	var err error
	if cs.keys, _, err = appendKey(cs.keys, k.GetValue(), t.pk); err != nil {
		return condError(apierror.InvalidArgument, i, t.url, "key", "key record: "+err.Error())
	}
	*cd = cond{on: onKey, t: t, key: span{int32(start), int32(len(cs.keys))}}
	return nil
}

// recordChecks validates the checks of a record or key condition and
// compiles its filter.
func (w *Writer) recordChecks(cat *catalog, cd *cond, i int, c *pb.Condition) error {
	const which = "; a record or key condition checks version or filter"
	switch {
	case c.Count != nil:
		return condError(apierror.InvalidArgument, i, cd.t.url, "count", "count is a check of a query condition"+which)
	case c.MaxVersion != nil:
		return condError(apierror.InvalidArgument, i, cd.t.url, "max_version", "max_version is a check of a query condition"+which)
	case c.Version == nil && c.GetFilter() == "":
		return condError(apierror.InvalidArgument, i, cd.t.url, "version", "condition names no check: set version or filter")
	}
	cd.version, cd.hasVersion = c.GetVersion(), c.Version != nil
	text := c.GetFilter()
	if text == "" {
		return nil
	}
	cs := &w.conds
	if cs.lastFilter != nil && cs.lastT == cd.t && cs.lastText == text {
		cd.filter = cs.lastFilter
		return nil
	}
	cq, err := w.e.compileIn(cat, &pb.Query{Type: string(cd.t.rt.Name), Filter: text})
	if err != nil {
		return compileError(i, cd.t.url, "filter", err)
	}
	cd.filter = cq.plan.Match()
	cs.lastT, cs.lastText, cs.lastFilter = cd.t, text, cd.filter
	return nil
}

// queryCondition compiles condition i on the matches of q.
func (w *Writer) queryCondition(cat *catalog, i int, c *pb.Condition, q *pb.Query) (cond, error) {
	const which = "; a query condition checks count or max_version"
	url := ""
	if t := cat.lookup(q.GetType()); t != nil {
		url = t.url
	}
	switch {
	case q == nil:
		return cond{}, condError(apierror.InvalidArgument, i, "", "query", "query is missing")
	case c.Version != nil:
		return cond{}, condError(apierror.InvalidArgument, i, url, "version", "version is a check of a record or key condition"+which)
	case c.GetFilter() != "":
		return cond{}, condError(apierror.InvalidArgument, i, url, "filter",
			"filter is a check of a record or key condition"+which+" (the query takes its own filter)")
	case c.Count == nil && c.MaxVersion == nil:
		return cond{}, condError(apierror.InvalidArgument, i, url, "count", "condition names no check: set count or max_version")
	}
	nq := proto.Clone(q).(*pb.Query)
	nq.Versions = true
	cq, err := w.e.compileIn(cat, nq)
	if err != nil {
		return cond{}, compileError(i, url, "query", err)
	}
	cd := cond{on: onQuery, t: cq.t, q: cq, match: cq.plan.Filter, limit: cq.plan.Limit,
		count: c.GetCount(), hasCount: c.Count != nil, maxVersion: c.GetMaxVersion(), hasMax: c.MaxVersion != nil}
	// Every record of the plan's ranges is counted against
	// MaxConditionReads before the filter and the limit apply.
	plan := *cq.plan
	plan.Filter, plan.Limit, plan.KeysOnly = nil, 0, false
	cq.plan = &plan
	cs := &w.conds
	start := len(cs.keys)
	cs.keys = keyspace.AppendWrittenKey(cs.keys, cq.t.rt.ID)
	cd.key = span{int32(start), int32(len(cs.keys))}
	return cd, nil
}

// compileError is the INVALID_ARGUMENT of condition i whose filter or
// query (field) does not compile.
func compileError(i int, url, field string, err error) error {
	var ae *apierror.Error
	if !errors.As(err, &ae) {
		return err
	}
	if ae.Code != apierror.InvalidArgument && ae.Code != apierror.NotFound {
		return err
	}
	msg := ae.Msg
	if !strings.HasPrefix(msg, field+": ") {
		msg = field + ": " + msg
	}
	return condError(apierror.InvalidArgument, i, url, field, msg)
}

// condError is the error of condition i of the current batch; the writer
// fills in the batch ordinal and applied counts.
func condError(code apierror.Code, i int, url, field, reason string) *apierror.Error {
	n := uint32(min(i, int(^uint32(0)))) //nolint:gosec // bounded above
	return &apierror.Error{Code: code, Msg: reason,
		Write: &pb.WriteError{Condition: &n, TypeUrl: url, Field: field, Reason: reason}}
}

// commitConditions is phase 2 of the batch's conditions, in commit: it
// checks them (checkConditions) and, on a shared store, marks the types
// the batch writes. done reports a batch of conditions alone, which it has
// committed: on a shared store its preconditions are checked by applying
// it, which writes nothing.
func (w *Writer) commitConditions(b store.WriteBatch) (done bool, err error) {
	// The batch's one clock reading: its conditions and its records (build)
	// see a record expired alike.
	w.now = w.e.now()
	if len(w.conds.list) > 0 {
		if err := w.checkConditions(b); err != nil {
			return false, err
		}
		if len(w.preps) == 0 {
			if w.e.st.Shared() {
				err = w.e.st.ApplyBatch(b)
			}
			return true, err
		}
	}
	w.markTypes(b)
	return false, nil
}

// checkConditions checks each condition in the state the batch starts
// from and, on a shared store, makes what it read a precondition of b.
func (w *Writer) checkConditions(b store.WriteBatch) error {
	cs := &w.conds
	rd := condReader{v: w.e.st}
	if w.e.st.Shared() {
		snap, err := w.e.st.OpenSnapshot()
		if err != nil {
			return err
		}
		defer snap.Close()
		if rd.it, err = snap.NewIterator(nil, nil); err != nil {
			return err
		}
		defer rd.it.Close()
		rd.v = snap
		cs.fetch = cs.fetch[:0]
		for i := range cs.list {
			cs.fetch = append(cs.fetch, cs.bytes(cs.list[i].key))
		}
		if err := rd.it.Prefetch(cs.fetch); err != nil {
			return err
		}
	}
	cs.reads = 0
	for i := range cs.list {
		c := &cs.list[i]
		var err error
		if c.on == onQuery {
			err = w.checkQuery(rd, b, i, c)
		} else {
			err = w.checkRecord(rd, b, i, c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// condReader reads what the conditions name: on a shared store from one
// snapshot, its point reads through an iterator that fetched them all in
// one round of requests; otherwise the latest state (under writeMu), its
// point reads by Get, the cheapest there (what build reads with).
type condReader struct {
	v  store.View
	it store.Iterator // shared stores only
}

// get reads key and its version (0 when absent).
func (rd condReader) get(key, dst []byte) ([]byte, uint64, bool, error) {
	if rd.it == nil {
		return rd.v.GetVersioned(key, dst)
	}
	val, found, err := rd.it.Lookup(key, dst)
	if err != nil || !found {
		return val, 0, false, err
	}
	return val, rd.it.Version(), true, nil
}

// checkRecord checks condition i on one record.
func (w *Writer) checkRecord(rd condReader, b store.WriteBatch, i int, c *cond) error {
	cs := &w.conds
	key := cs.bytes(c.key)
	val, ver, found, err := rd.get(key, cs.buf[:0])
	if err != nil {
		return err
	}
	cs.buf = val
	b.Expect(key, ver)
	if found && c.t.expired(val, w.now) {
		found, ver = false, 0 // an expired record is absent (expiry.go)
	}
	switch {
	case c.hasVersion && ver != c.version:
		return w.condFailed(i, c, ver, versionReason(ver, c.version))
	case c.filter == nil:
		return nil
	case !found:
		return w.condFailed(i, c, 0, "the record does not exist: the filter needs one that matches it")
	}
	ok, err := c.filter.Match(val)
	if err != nil {
		return &apierror.Error{Code: apierror.Internal, Msg: "stored record of " + c.t.url + " unreadable: " + err.Error(), Err: err}
	}
	if !ok {
		return w.condFailed(i, c, ver, "the record at version "+strconv.FormatUint(ver, 10)+" does not match the filter")
	}
	return nil
}

func versionReason(found, want uint64) string {
	switch {
	case found == 0:
		return "the record does not exist; version " + strconv.FormatUint(want, 10) + " expected"
	case want == 0:
		return "the record exists at version " + strconv.FormatUint(found, 10) + "; none expected"
	}
	return "the record is at version " + strconv.FormatUint(found, 10) + "; version " + strconv.FormatUint(want, 10) + " expected"
}

// checkQuery checks condition i on the matches of a query.
func (w *Writer) checkQuery(rd condReader, b store.WriteBatch, i int, c *cond) error {
	cs := &w.conds
	if rd.it != nil {
		mark := cs.bytes(c.key)
		_, ver, _, err := rd.get(mark, cs.buf[:0])
		if err != nil {
			return err
		}
		b.Expect(mark, ver)
	}
	ctx := cs.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	limit := w.e.opts.MaxConditionReads
	cu := &cursor{e: w.e, c: c.q, r: rd.v, now: w.now, inBatch: true}
	var n, top uint64
	var over bool
	var ferr error
	err := cu.run(ctx, c.q.plan.Ranges, nil, func(_, rec []byte) bool {
		if cs.reads++; cs.reads > limit {
			over = true
			return false
		}
		if c.match != nil {
			ok, err := c.match.Match(rec)
			if err != nil {
				ferr = err
				return false
			}
			if !ok {
				return true
			}
		}
		n++
		top = max(top, cu.ver)
		return c.limit == 0 || n < c.limit
	})
	cu.flushStats()
	switch {
	case err != nil && ctx.Err() != nil:
		return apierror.From(ctx.Err()) // the call's end: CANCELLED or DEADLINE_EXCEEDED
	case err != nil:
		return err
	case ferr != nil:
		return &apierror.Error{Code: apierror.Internal, Msg: "stored record of " + c.t.url + " unreadable: " + ferr.Error(), Err: ferr}
	case over:
		return condError(apierror.ResourceExhausted, i, c.t.url, "query",
			"the batch's query conditions read more than "+itoa(limit)+" records, the server's limit: narrow the query or give it a limit")
	case c.hasCount && n != c.count, c.hasMax && top != c.maxVersion:
		return w.condFailed(i, c, top, "the query matches "+strconv.FormatUint(n, 10)+" records, the highest version among them "+
			strconv.FormatUint(top, 10)+"; expected "+queryExpected(c))
	}
	return nil
}

// queryExpected says what a query condition expected.
func queryExpected(c *cond) string {
	var s string
	if c.hasCount {
		s = strconv.FormatUint(c.count, 10) + " matches"
	}
	if c.hasMax {
		if s != "" {
			s += " and "
		}
		s += "highest version " + strconv.FormatUint(c.maxVersion, 10)
	}
	return s
}

// condFailed is the ABORTED of condition i, which found version found.
func (w *Writer) condFailed(i int, c *cond, found uint64, reason string) error {
	if c.on == onRecord {
		reason = "record " + itoa(c.record) + ": " + reason
	}
	e := condError(apierror.Aborted, i, c.t.url, "", reason)
	e.Write.Version = found
	if c.on == onRecord {
		e.Write.Record = uint64(c.record) //nolint:gosec // an index into the batch
	}
	return e
}

// markTypes rewrites, on a shared store, the write mark of each type the
// batch writes (see the comment at the top of the file).
func (w *Writer) markTypes(b store.WriteBatch) {
	if !w.e.st.Shared() {
		return
	}
	cs := &w.conds
	cs.marked = cs.marked[:0]
	for i := range w.preps {
		id := w.preps[i].t.rt.ID
		if slices.Contains(cs.marked, id) {
			continue
		}
		cs.marked = append(cs.marked, id)
		cs.mark = keyspace.AppendWrittenKey(cs.mark[:0], id)
		b.Set(cs.mark, nil)
	}
}
