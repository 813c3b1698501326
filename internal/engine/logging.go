package engine

import (
	"log/slog"
	"time"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// The engine's log lines name types and indexes, never their internal ids:
// an operator reads them against the schema. Key material and record
// contents are never logged.

// indexNames returns the type and index names of an index, for logs; the
// ids when the catalog no longer has them (dropped meanwhile).
func (e *Engine) indexNames(typeID, indexID uint32) (typ, idx string) {
	t := e.cat.Load().byID[typeID]
	if t == nil {
		return "type#" + itoa(int(typeID)), "index#" + itoa(int(indexID))
	}
	for _, ix := range t.rt.Indexes {
		if ix.ID == indexID {
			return string(t.rt.Name), ix.Name
		}
	}
	return string(t.rt.Name), "index#" + itoa(int(indexID))
}

// queryDone reports a Scan or Query page that ran: to Options.ObserveQuery,
// and, when it ran for longer than Options.SlowQuery (0: never), as one
// info line saying what it asked, how it ran, how many records it
// returned and, for a Scan, how many it read (a filter that matches few
// of them is what makes a Scan slow).
func (e *Engine) queryDone(call string, c *compiled, start time.Time, records, read uint64) {
	if c == nil || (e.opts.SlowQuery <= 0 && e.opts.ObserveQuery == nil) {
		return
	}
	took := time.Since(start)
	if e.opts.ObserveQuery != nil {
		e.opts.ObserveQuery(call, c.plan.Access.String(), took)
	}
	if e.opts.SlowQuery <= 0 || took < e.opts.SlowQuery {
		return
	}
	attrs := []any{"call", call, "type", string(c.t.rt.Name),
		"access", c.plan.Access.String(), "index", planIndex(c), "ranges", len(c.plan.Ranges),
		"records", records}
	if call == "Scan" {
		attrs = append(attrs, "records_read", read)
	}
	e.log.Info("slow query", append(attrs, "took_ms", millis(took))...)
}

// millis is a duration in milliseconds to the microsecond, as log lines
// give durations: a field named for its unit reads the same in text and
// JSON, where slog would write a time.Duration as "1.5ms" in one and as
// nanoseconds in the other.
func millis(d time.Duration) float64 {
	return float64(d.Round(time.Microsecond).Microseconds()) / 1000
}

func planIndex(c *compiled) string {
	if c.plan.Index != nil {
		return c.plan.Index.Name
	}
	return ""
}

// logSchemaApplied logs one info line per schema change, naming what it
// added, changed and dropped (types, and indexes as TYPE.INDEX).
func logSchemaApplied(log *slog.Logger, version uint64, p *pb.SchemaPlan) {
	var changed, dropped, ixAdded, ixDropped []string
	for _, c := range p.GetTypesChanged() {
		changed = append(changed, c.GetType())
	}
	for _, d := range p.GetTypesDropped() {
		dropped = append(dropped, d.GetType())
	}
	for _, ix := range p.GetIndexesAdded() {
		ixAdded = append(ixAdded, ix.GetType()+"."+ix.GetIndex())
	}
	for _, ix := range p.GetIndexesDropped() {
		ixDropped = append(ixDropped, ix.GetType()+"."+ix.GetIndex())
	}
	log.Info("schema applied", "version", version,
		"types_added", p.GetTypesAdded(), "types_changed", changed, "types_dropped", dropped,
		"indexes_added", ixAdded, "indexes_dropped", ixDropped)
}

// IndexBuilds returns the number of indexes being built in the background.
func (e *Engine) IndexBuilds() int {
	n := 0
	for _, t := range e.cat.Load().types {
		for _, ix := range t.indexes {
			if ix.building {
				n++
			}
		}
	}
	return n
}

// logSlowSearch logs one info line for a chunk of a Search request (the
// queries one worker runs together; a small request is one chunk) that
// ran longer than Options.SlowQuery: queries are timed together, as a
// clock read per lookup would cost more than some lookups.
func (e *Engine) logSlowSearch(qs []*pb.Query, start time.Time) {
	took := time.Since(start)
	if took < e.opts.SlowQuery || len(qs) == 0 {
		return
	}
	e.log.Info("slow query", "call", "Search", "type", qs[0].GetType(), "queries", len(qs), "took_ms", millis(took))
}
