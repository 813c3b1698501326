// Package apiwire gives internal/engine the names it reads internal/wire
// by: the field numbers of SearchRequest and SearchResponse and the
// reader of a query's common shape. Each is internal/wire's own; other
// code imports internal/wire.
package apiwire

import "github.com/protobase/protobase/internal/wire"

// Field numbers, as internal/wire declares them.
const (
	SearchRequestQueries  = wire.SearchRequestQueries
	SearchResponseResults = wire.SearchResponseResults
	SearchResponseDone    = wire.SearchResponseDone
	SearchResponseErrors  = wire.SearchResponseErrors
	ResultBatchQuery      = wire.ResultBatchQuery
	ResultBatchRecords    = wire.ResultBatchRecords
	QueryDoneQuery        = wire.QueryDoneQuery
	QueryDoneCount        = wire.QueryDoneCount
)

// Query is wire.Query.
type Query = wire.Query

// Operand is wire.Operand.
type Operand = wire.Operand

// ReadQuery is wire.ReadQuery.
func ReadQuery(b []byte, q *Query) bool { return wire.ReadQuery(b, q) }

// ReadOperand is wire.ReadOperand.
func ReadOperand(b []byte, v *Operand) bool { return wire.ReadOperand(b, v) }
