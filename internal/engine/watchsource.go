package engine

import (
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/query"
	"github.com/protobase/protobase/internal/schema"
	"github.com/protobase/protobase/internal/store"
)

// WatchSource is what Watch streams (internal/watch) need of the engine:
// the record types and filters they resolve, where changes come from (the
// change log, or a Shared store's own feed), the result budget their
// responses hold, and the counters they keep. *Engine implements it; the
// watch package imports this interface and never the engine's state.
type WatchSource interface {
	// Store is the engine's store: on a Shared one implementing
	// store.Feed, Watch reads the store's feed instead of the change log.
	Store() store.KV
	// ChangeLog is the engine's change log.
	ChangeLog() *changelog.Log
	// Schema is the current schema state; its Version says whether types
	// resolved against it still hold.
	Schema() *schema.State
	// WatchType resolves a record type by name, with the filter compiled
	// in it.
	WatchType(name string, where *pb.Expr, filter string) (WatchType, error)
	// Options are the engine's, with the defaults filled in: the result
	// limits bound watch responses.
	Options() Options
	// Reservation starts a response's hold on the result budget.
	Reservation() Reservation
	// Stats are the engine's counters: watches keep Watches and
	// WatchChanges.
	Stats() *Stats
	// Done is closed when the engine closes.
	Done() <-chan struct{}
}

var _ WatchSource = (*Engine)(nil)

// WatchType is one record type a watch reads the changes of, and its
// filter. Its slices are the catalog's, shared: not to be changed.
type WatchType struct {
	// ID is the type's storage id: the change log names types by it, and
	// record keys carry it.
	ID   uint32
	Name string // full name
	URL  string // canonical type URL
	// URLField is URL encoded as Any.type_url, with its tag: what every
	// Any of the type written by hand begins with.
	URLField []byte
	// KeyFields are the top-level fields holding the primary key.
	KeyFields []protowire.Number
	// Filter tests a record's bytes (nil: every record matches).
	Filter *query.Filter
}

// WatchType resolves the record type name and compiles the filter (where,
// or filter as text: not both) in it, as a Query on the type is compiled:
// the same errors, and fields resolved in that type.
func (e *Engine) WatchType(name string, where *pb.Expr, filter string) (WatchType, error) {
	if filter != "" && where != nil {
		return WatchType{}, filterError("watch has both filter and where: set one of them", nil)
	}
	c, err := e.compile(&pb.Query{Type: name, Where: where, Filter: filter})
	if err != nil {
		return WatchType{}, err
	}
	t := c.t
	return WatchType{ID: t.rt.ID, Name: string(t.rt.Name), URL: t.url, URLField: t.urlField,
		KeyFields: t.pkNums, Filter: c.plan.Match()}, nil
}
