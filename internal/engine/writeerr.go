package engine

import (
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
)

// The errors a write batch meets, and how a stream's failure names its
// batch with the counts applied before it.

// checkExistence is the existence rule: insert needs the primary key free,
// update, remove and patch need it taken.
func checkExistence(op Op, i int, p *prep, found bool) error {
	switch {
	case op == OpInsert && found:
		return recordError(apierror.AlreadyExists, i, p.url, pkFields(p.t),
			"a record with this primary key exists")
	case (op == OpUpdate || op == OpRemove || op == OpPatch) && !found:
		return recordError(apierror.NotFound, i, p.url, pkFields(p.t),
			"no record with this primary key")
	}
	return nil
}

// uniqueError is the error of record i, whose entry key k in the unique
// index j of its type another record holds. In an index on a repeated
// field no two records share an element: the error names it.
func uniqueError(i int, p *prep, j int, k []byte) error {
	ix := p.t.indexes[j]
	if r := p.t.keys.multi[j]; r >= 0 {
		return recordError(apierror.AlreadyExists, i, p.url, ix.ix.Fields[r].Path,
			"unique index "+ix.ix.Name+" already holds the element "+p.t.keys.elementOf(ix, j, k)+
				" for another record: no two records may share an element")
	}
	return recordError(apierror.AlreadyExists, i, p.url, strings.Join(indexFields(ix), ","),
		"unique index "+ix.ix.Name+" already holds this value for another record")
}

func pkFields(t *recType) string {
	s := make([]string, len(t.rt.PrimaryKey))
	for i, kf := range t.rt.PrimaryKey {
		s[i] = kf.Path
	}
	return strings.Join(s, ",")
}

func indexFields(ix *index) []string {
	s := make([]string, len(ix.ix.Fields))
	for i, kf := range ix.ix.Fields {
		s[i] = kf.Path
	}
	return s
}

// Abort ends a stream whose next batch never reached Apply because the
// transport could not receive or decode it (malformed JSON, an oversized
// message, a cancelled stream). The batches applied before it are made
// durable first, so the counts it reports are true, and err comes back as an
// *apierror.Error naming batch Batches() with those counts: a client learns exactly
// what was kept, whichever transport it used. An *apierror.Error keeps its code and
// record details; any other error gets the code apierror.From gives it (the
// transport has turned an error of its own, a gRPC status, into an
// *apierror.Error already).
func (w *Writer) Abort(err error) error {
	w.Use(Reserved{}) // the request is not applied
	if _, serr := w.Sync(); serr != nil {
		return serr
	}
	cp := *apierror.From(err) // the caller's error stays as it was
	if cp.Write != nil {
		cp.Write = proto.Clone(cp.Write).(*pb.WriteError)
	}
	return w.stamp(&cp)
}

// stamp names the stream's next batch as the failed one in e's WriteError
// (adding one if e has none), with the counts applied before it, and
// counts the failure.
func (w *Writer) stamp(e *apierror.Error) *apierror.Error {
	if e.Write == nil {
		e.Write = &pb.WriteError{Reason: e.Msg}
	}
	e.Write.Batch = w.batches
	e.Write.BatchesApplied = w.batches
	e.Write.RecordsApplied = w.records
	w.e.stats.WriteErrors.Add(1)
	return e
}
