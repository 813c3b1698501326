package engine

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/store"
)

// A schema change that changes how a type's records expire (its ttl
// option removed, or naming another field or unit) would make the records
// expired under the old rule but not yet reaped readable again. So the
// change first reaps them under the old rule (retireTTLs), and commits
// only if none is left at the commit (expiredLeft, read under writeMu as
// a precondition of the commit's batch); else it reaps and tries again,
// like a plan gone stale.

// ttlRetirements returns the types of base whose expiry rule res changes,
// in name order. A type whose old expiry index is not ready cannot be
// reaped under its old rule: the change is refused until it is.
func ttlRetirements(base *catalog, res *schema.Result) ([]*recType, error) {
	var out []*recType
	for _, t := range base.types {
		old := t.rt.TTL
		if old == nil {
			continue
		}
		nt, kept := res.State.ByID[t.rt.ID]
		if !kept || sameTTL(old, nt.TTL) {
			continue // a dropped type goes with its records
		}
		if ix := t.expiryIndex(); ix == nil || ix.building {
			state := "being built: apply the change once it is READY (schema get shows its state)"
			if ix == nil {
				state = "failed: apply the current schema again to rebuild it, then the change"
			}
			return nil, &apierror.Error{Code: apierror.FailedPrecondition, Msg: fmt.Sprintf(
				"type %s: its ttl cannot change while its expiry index %s is not ready (the records expired under the current ttl are reaped through it first, or would become readable again); the index is %s",
				t.rt.Name, schema.ExpiryIndexName, state)}
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *recType) int { return cmp.Compare(a.rt.Name, b.rt.Name) })
	return out, nil
}

// sameTTL reports whether two ttl options expire every record alike: the
// same field (by number: a renamed field holds the same values) and unit.
func sameTTL(a, b *schema.TTL) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Field.Number() == b.Field.Number() && a.Field.Kind() == b.Field.Kind() && a.Unit == b.Unit
}

// retireTTLs reaps the records of ts expired by now under their current
// ttl, through the write path (index entries, aggregates, the change log's
// expiries).
func (e *Engine) retireTTLs(ctx context.Context, ts []*recType) error {
	for _, t := range ts {
		if _, err := e.reapType(ctx, t); err != nil {
			return fmt.Errorf("reap the records of %s expired under its current ttl before changing it: %w", t.rt.Name, err)
		}
	}
	return nil
}

// expiredLeft reports whether a record of ts has expired by now under its
// current ttl and is still stored: whether its expiry index holds an
// entry below now's (but for those of records that never expire). The
// reads are preconditions of b, the schema change's batch: under writeMu
// no write of this server adds such a record before the new rule
// applies, and on a shared store one by another server fails the commit.
func (e *Engine) expiredLeft(b store.WriteBatch, ts []*recType) (bool, error) {
	now := e.now()
	for _, t := range ts {
		r := t.expiredRange(now)
		for _, span := range [][2][]byte{{r.lower, r.zero}, {r.zeroEnd, r.upper}} {
			if bytes.Compare(span[0], span[1]) >= 0 {
				continue
			}
			if empty, err := b.ReadAbsent(span[0], span[1]); err != nil || !empty {
				return !empty, err
			}
		}
	}
	return false, nil
}
