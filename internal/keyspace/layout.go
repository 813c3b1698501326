package keyspace

// Layout is this key space as the Pebble store (internal/store/pebble's
// Layout) is told it: which keys its index instance holds, where the
// store keeps keys of its own, where its tables end, what a full
// compaction covers, which keys mark a store of an earlier version, which
// keys are records (whose versions the store keeps) and where the last
// commit sequence is.
// The zero value is the layout; the server opens every Pebble store with
// it.
type Layout struct{}

// IndexSpan returns the span of every index entry: the keys that start
// with TagIndex.
func (Layout) IndexSpan() (lower, upper []byte) {
	return []byte{TagIndex}, []byte{TagIndex + 1}
}

// StorePrefix returns StorePrefix: every key of the engine sorts after
// the keys that start with it.
func (Layout) StorePrefix() []byte { return []byte(StorePrefix) }

// SpanEnd is the package's SpanEnd.
func (Layout) SpanEnd(key []byte) []byte { return SpanEnd(key) }

// Bounds is the package's Bounds.
func (Layout) Bounds() (lower, upper []byte) { return Bounds() }

// KnownKeys returns the meta keys every store the engine has opened
// holds one of: the secret that signs page tokens is written at its first
// open, the schema with the first schema applied.
func (Layout) KnownKeys() [][]byte {
	return [][]byte{[]byte(SecretKey), []byte(SchemaKey)}
}

// RecordSpan returns the span of every record: the keys that start with
// TagRecord.
func (Layout) RecordSpan() (lower, upper []byte) {
	return []byte{TagRecord}, []byte{TagRecord + 1}
}

// PositionKey returns SeqKey, which holds the last commit sequence.
func (Layout) PositionKey() []byte { return []byte(SeqKey) }
