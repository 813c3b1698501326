package engine

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/internal/apierror"
)

// Get is the point lookup without the query machinery. key is a record of
// the wanted type of which only the primary-key fields are read (as Remove
// reads them); Get returns the stored record with that primary key, its
// bytes exactly as stored under the canonical type URL (read-only: they
// may be the record cache's own), or nil when there is none.
//
// It costs one record-cache probe and, on a miss, one storage Get: no planning, no snapshot (a single Get is
// atomic), and no decode beyond reading the key fields with protowire. A
// Query with EQ on every primary-key field reaches the same single Get
// through the planner; Get exists for transports (NATS) whose clients make
// many one-record lookups and should not pay for a query per record.
func (e *Engine) Get(ctx context.Context, key *anypb.Any) (*anypb.Any, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.stats.Queries.Add(1)
	if obs := e.opts.Observer; obs != nil {
		defer observeGet(obs, time.Now())
	}
	if key == nil {
		e.stats.QueryErrors.Add(1)
		return nil, &apierror.Error{Code: apierror.InvalidArgument, Msg: "key record is missing"}
	}
	t := e.cat.Load().lookup(key.TypeUrl)
	if t == nil {
		e.stats.QueryErrors.Add(1)
		return nil, &apierror.Error{Code: apierror.InvalidArgument, Field: "type_url",
			Msg: "unknown type URL " + quote(key.TypeUrl) + ": no record type of that name in the schema"}
	}
	k := make([]byte, 0, len(t.prefix)+32)
	k = append(k, t.prefix...)
	k, field, err := appendKey(k, key.Value, t.pk)
	if err != nil {
		e.stats.QueryErrors.Add(1)
		return nil, &apierror.Error{Code: apierror.InvalidArgument, Field: field, Msg: "key record: " + err.Error(), Err: err}
	}
	e.stats.PointLookups.Add(1)
	val, found, err := e.readThrough(k)
	if err != nil {
		e.stats.QueryErrors.Add(1)
		return nil, readError("point read", err)
	}
	if !found || e.expiredNow(t, val) {
		return nil, nil
	}
	e.stats.RecordsRead.Add(1)
	return &anypb.Any{TypeUrl: t.url, Value: val}, nil
}

// readThrough reads one key from the record cache, else from the store,
// offering what the store had to the cache under the write generation seen
// before the read (so a write committed meanwhile keeps it out). A hit is
// the cache's own entry (recordcache.View), not a copy: every caller only
// encodes it into an answer, and an entry is never written once stored.
func (e *Engine) readThrough(key []byte) (val []byte, found bool, err error) {
	if val, hit := e.cache.View(key); hit {
		return val, true, nil
	}
	gen := e.cache.Gen()
	if val, found, err = e.st.Get(key, nil); found && err == nil {
		e.cache.Fill(key, val, gen)
	}
	return val, found, err
}
