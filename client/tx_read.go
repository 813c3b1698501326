package client

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Get reads records of typeName by primary key, as Client.Get does (the
// same key forms), and records each as a condition: the version read, 0
// for a key with no record. A record the transaction wrote is returned as
// its writes leave it (nil once removed); a record read before is
// returned as first read, without asking the server again.
func (tx *Tx) Get(typeName string, keys ...any) ([]*anypb.Any, error) {
	if err := tx.usable(); err != nil {
		return nil, err
	}
	t, err := tx.c.recordTypes(tx.ctx, typeName)
	if err != nil {
		return nil, err
	}
	kt, err := t.keyType(typeName)
	if err != nil {
		return nil, err
	}
	rks := make([]recKey, len(keys))
	for i, k := range keys {
		if rks[i], err = t.valueKey(kt, k); err != nil {
			return nil, fmt.Errorf("get %s: key %d: %w", typeName, i, err)
		}
	}
	return tx.getKeys(t, typeName, rks)
}

// getKeys reads the records rks of typeName: from the server those the
// transaction needs the stored state of and has not read, in one Get.
func (tx *Tx) getKeys(t *Types, typeName string, rks []recKey) ([]*anypb.Any, error) {
	var fetch []*txRecord
	var keys []any
	asked := map[*txRecord]bool{}
	for _, rk := range rks {
		r := tx.record(rk)
		if r.read || (r.wrote && r.known) || asked[r] {
			continue
		}
		asked[r] = true
		fetch = append(fetch, r)
		keys = append(keys, rk.key)
	}
	if len(fetch) > 0 {
		recs, vers, err := tx.c.GetVersioned(tx.ctx, typeName, keys...)
		if err != nil {
			return nil, err
		}
		for i, r := range fetch {
			r.read, r.stored, r.version = true, recs[i], vers[i]
		}
	}
	out := make([]*anypb.Any, len(rks))
	for i, rk := range rks {
		r := tx.recs[rk.id]
		if r.wrote && !r.known { // patches of what was just read
			if err := r.resolve(t, tx.fields, tx.add); err != nil {
				return nil, fmt.Errorf("get %s: key %d: %w", typeName, i, err)
			}
		}
		if !r.wrote || r.fromStored {
			tx.keyCondition(r, r.version)
		}
		out[i] = r.stored
		if r.wrote {
			out[i] = r.value
		}
	}
	return out, nil
}

// resolve applies r's pending patches to the stored record, now read.
func (r *txRecord) resolve(t *Types, fields, add []string) error {
	v := r.stored
	for _, p := range r.patches {
		var err error
		if v, err = t.applyPatch(v, p, fields, add); err != nil {
			return err
		}
	}
	r.known, r.fromStored, r.value, r.patches = true, true, v, nil
	return nil
}

// Query reads every record q matches (up to its limit) and records the
// query as a condition; see Search.
func (tx *Tx) Query(q *pb.Query) ([]*anypb.Any, error) {
	rs, err := tx.Search(q)
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

// Search reads every record each query matches (up to its limit), the
// queries sent together on one Search stream, and returns the records of
// each query in its order.
//
// A query that names one primary key (Eq on each primary-key field,
// alone or under one And; no text filter, keys_only or count) is read as
// Get reads it: the record's version becomes a key condition, and the
// transaction's own writes show. Many such lookups in one call cost one
// Get per type. Any other query becomes a query condition: at commit it
// must match as many records, with the same highest version, as it did
// here (a count query: the same count). A query that filled its limit
// also records each record it returned as a key condition, since a record
// that leaves the first limit matches lets one from beyond them in
// without changing either figure. Such queries return what is stored,
// without the transaction's own writes.
func (tx *Tx) Search(qs ...*pb.Query) ([][]*anypb.Any, error) {
	if err := tx.usable(); err != nil {
		return nil, err
	}
	out := make([][]*anypb.Any, len(qs))
	type lookups struct {
		t   *Types
		rks []recKey
		qi  []int
	}
	byType := map[string]*lookups{}
	var order []string // types in the order first met
	var sent []int     // the queries sent as queries
	for i, q := range qs {
		if q == nil {
			return nil, fmt.Errorf("search: query %d is nil", i)
		}
		t, err := tx.c.recordTypes(tx.ctx, q.GetType())
		if err != nil {
			return nil, err
		}
		rk, ok := t.lookupKey(q)
		if !ok {
			sent = append(sent, i)
			continue
		}
		l := byType[q.GetType()]
		if l == nil {
			l = &lookups{t: t}
			byType[q.GetType()] = l
			order = append(order, q.GetType())
		}
		l.rks, l.qi = append(l.rks, rk), append(l.qi, i)
	}
	for _, name := range order {
		l := byType[name]
		recs, err := tx.getKeys(l.t, name, l.rks)
		if err != nil {
			return nil, err
		}
		for j, i := range l.qi {
			out[i] = []*anypb.Any{}
			if recs[j] != nil {
				out[i] = recs[j : j+1 : j+1]
			}
		}
	}
	if len(sent) > 0 {
		if err := tx.search(qs, sent, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// search runs the queries qs[i] for i in sent on one Search stream, with
// versions, and records each as a condition.
func (tx *Tx) search(qs []*pb.Query, sent []int, out [][]*anypb.Any) error {
	s, err := tx.c.NewSearch(tx.ctx)
	if err != nil {
		return err
	}
	defer s.cancel()
	batch := make([]*pb.Query, len(sent))
	for j, i := range sent {
		q := proto.Clone(qs[i]).(*pb.Query)
		q.Versions, q.Explain = true, false
		batch[j] = q
	}
	rs, err := s.Batch(batch)
	if err != nil {
		return err
	}
	for j, i := range sent {
		recs, vers := []*anypb.Any{}, []uint64{}
		for {
			a, err := rs[j].Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			recs, vers = append(recs, a), append(vers, rs[j].Version())
		}
		if err := tx.readQuery(qs[i], recs, vers, rs[j].Count()); err != nil {
			return err
		}
		out[i] = recs
	}
	return s.Close()
}

// readQuery records what the query q read: records with their versions,
// or for a count query the count.
func (tx *Tx) readQuery(q *pb.Query, recs []*anypb.Any, vers []uint64, count uint64) error {
	cq := proto.Clone(q).(*pb.Query)
	cq.Versions, cq.Explain, cq.KeysOnly, cq.Count = false, false, false, false
	c := IfCount(cq, count)
	if !q.GetCount() {
		var top uint64
		for _, v := range vers {
			top = max(top, v)
		}
		c = IfQuery(cq, uint64(len(recs)), top)
	}
	// One condition per query: what a query read twice saw first is what
	// the commit checks (if the second read saw otherwise, the first no
	// longer holds and the commit aborts).
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(cq)
	if err != nil {
		return err
	}
	id := fmt.Sprint(q.GetCount()) + string(b)
	if !tx.queries[id] {
		tx.queries[id] = true
		tx.conds = append(tx.conds, c)
	}
	if q.GetCount() || q.GetLimit() == 0 || uint64(len(recs)) < q.GetLimit() {
		return nil
	}
	for i, a := range recs {
		t, err := tx.c.recordTypes(tx.ctx, typeName(a.GetTypeUrl()))
		if err != nil {
			return err
		}
		_, rk, err := t.recordKey(a)
		if err != nil {
			return err
		}
		r := tx.record(rk)
		if !r.read && !q.GetKeysOnly() {
			r.read, r.stored, r.version = true, a, vers[i]
		}
		tx.keyCondition(r, vers[i])
	}
	return nil
}
