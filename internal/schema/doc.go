// Package schema owns Protobase's schema: it compiles the .proto sources a
// client sends with ApplySchema, finds the record types in them (messages
// carrying the (protobase.v1.record) option from protobase/v1/options.proto),
// validates their primary keys and indexes, and decides whether a new set of
// sources may replace the current one.
//
// It is pure logic. It does no I/O and keeps no mutable globals: the engine
// persists the bytes of [State.Encode], reads them back with [Decode], and
// answers "how many records does this type hold?" through a [Counts] callback
// when [Plan] needs to know.
//
// # Model
//
//   - [Compile] turns a map of file name → source into a [Compiled]: linked
//     descriptors, a registry of every file (user files and their imports)
//     and the record types found, without storage ids.
//   - A [State] is one version of the schema: a Compiled plus the storage ids
//     of its types and indexes, and each index's build state. Ids are
//     assigned by [Plan] from counters that only grow, so an id is never
//     reused, even after its type or index is dropped.
//   - [Plan] compiles a whole new set of files against the current State and
//     returns the API plan, the next State and what the engine must do about
//     storage (types and indexes to delete, indexes to build).
//
// # Invariants
//
// Compiled, RecordType, Index and State values are immutable once built and
// safe to share between goroutines. A State is never changed in place: a new
// State is built instead ([Plan], [State.WithIndexState] copy what changes and
// share the rest), so a reader holding a *State keeps a consistent view.
// Callers must not modify the maps and slices reachable from these values.
package schema
