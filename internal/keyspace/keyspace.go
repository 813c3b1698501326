// Package keyspace owns the layout of the store's one ordered key space:
// the one-byte tags that split it, the meta keys, the record and index key
// prefixes, and the parsing of index entries. The engine writes keys in
// this layout and the query planner computes ranges in it; neither spells
// a tag or a meta key itself. docs/design.md shows the same table, and a
// test keeps the two in step.
//
//	00 "schema"                -> encoded schema.State
//	00 "seq"                   -> last commit sequence (8 bytes BE)
//	00 "secret"                -> the 32-byte key that signs page tokens
//	00 "apikey/" name          -> an API key record (encoded by internal/auth)
//	00 "build/" indexID(4 BE)  -> the last record key an index build indexed
//	00 "build/" indexID(4 BE) "/" lease -> the build's lock (shared stores)
//	00 "log/" commit(8 BE)     -> the change-log entry of one commit (Watch)
//	00 "written/" typeID(4 BE) -> empty: the type's write mark, which every
//	                              batch writing the type rewrites (shared
//	                              stores only)
//	01 typeID(4 BE) pk         -> record bytes, exactly as received (the
//	                              Pebble store keeps the record's version
//	                              in front of them and strips it on reads)
//	02 indexID(4 BE) ixkey pk  -> empty (non-unique index)
//	02 indexID(4 BE) ixkey     -> pk (unique index)
//	02 indexID(4 BE) groupkey  -> count and sums of one group (aggregate
//	                              index; encoded by the engine, aggindex.go)
//
// pk and ixkey are internal/orderedcode encodings of the key fields; they are
// self-delimiting, so a non-unique entry's pk is the suffix after ixkey.
// Every key starts with its tag, so the spaces never interleave and each
// type's records and each index can be range-deleted on its own.
//
// The Pebble store (internal/store/pebble) keeps keys of its own under
// StorePrefix, before every other key, which its reads never show: the
// mark of a store with an index instance and its index journal (the index
// writes of batches the index instance has not flushed). The store names
// them; they are listed here to show the whole key space:
//
//	00 00 "floor"              -> the version of records stored without one
//	00 00 "index"              -> present in a store with an index instance
//	00 00 "ixlog/" n(8 BE)     -> one batch's index writes (encoded batch)
//
// Layout hands the Pebble store what it needs of this layout, so that the
// store parses no key itself.
//
// The package is pure: no I/O, no mutable globals.
package keyspace

import (
	"encoding/binary"
	"errors"

	"github.com/protobase/protobase/internal/orderedcode"
)

// The tags: the first byte of every key.
const (
	TagMeta   byte = 0x00
	TagRecord byte = 0x01
	TagIndex  byte = 0x02
)

// PrefixLen is the length of a record or index key prefix: the tag and a
// 4-byte big-endian type or index id.
const PrefixLen = 5

// The meta keys. They are strings so no caller can modify them; convert
// once (engine keeps []byte copies) rather than per use on hot paths.
const (
	// SchemaKey holds the encoded schema state.
	SchemaKey = "\x00schema"
	// SeqKey holds the last commit sequence, 8 bytes big-endian.
	SeqKey = "\x00seq"
	// SecretKey holds the 32-byte secret that signs page tokens.
	SecretKey = "\x00secret"
	// APIKeyPrefix starts every API key record; the key name follows. The
	// records sit beside the schema so that whatever store carries the
	// records carries the keys too.
	APIKeyPrefix = "\x00apikey/"
	// BuildPrefix starts the checkpoint of an index build (the last
	// record key it indexed, so that a build resumes after a restart or on
	// another server) and, on a shared store, the build's lock.
	BuildPrefix = "\x00build/"
	// LogPrefix starts the change log's entries: one per committed write
	// batch, keyed by its commit sequence (8 bytes big-endian), so the log
	// iterates in commit order and trims as one DeleteRange of a prefix.
	// A large entry is stored in parts, under the commit's key followed by
	// the part's number (4 bytes big-endian): they sort after the commit's
	// own key and before the next commit's.
	LogPrefix = "\x00log/"
	// WrittenPrefix starts a type's write mark on a shared store (etcd):
	// every write batch that writes a record of the type also rewrites its
	// mark (the type id, 4 bytes big-endian, follows), so that a batch
	// whose query condition read the type conflicts with any batch that
	// wrote the type since: it expects the mark at the version it read.
	WrittenPrefix = "\x00written/"
	// StorePrefix starts the Pebble store's own keys: the mark of a store
	// with an index instance, so that one whose index directory went
	// missing is refused, not read without its index entries, and the
	// index journal (internal/store/pebble, index.go). Every key of the
	// engine sorts after them, and beside them only the meta keys that
	// rarely change, so that compacting the journal never takes the
	// records' or the change log's newest tables with it.
	StorePrefix = "\x00\x00"
	// ExpiryMarkKey is rewritten by every reaper batch on a shared store
	// (etcd), so that a reader of the store's revisions (Watch) tells the
	// batch's deletions, expired records, from a client's removes. It is
	// the record prefix of type id 0, which no type has: it lies in the
	// record space the watch reads, and no type's scan meets it.
	ExpiryMarkKey = "\x01\x00\x00\x00\x00"
)

// LogKeyLen is the length of a change-log key.
const LogKeyLen = len(LogPrefix) + 8

// AppendLogKey appends the change-log key of a commit.
func AppendLogKey(dst []byte, commit uint64) []byte {
	return appendNumberedKey(dst, LogPrefix, commit)
}

// LogCommit returns the commit of a change-log key; ok is false when key
// is not one.
func LogCommit(key []byte) (commit uint64, ok bool) {
	return numberedKey(key, LogPrefix)
}

// LogPartKeyLen is the length of the key of a part of a change-log entry.
const LogPartKeyLen = LogKeyLen + 4

// AppendLogPartKey appends the key of part n of a commit's change-log
// entry.
func AppendLogPartKey(dst []byte, commit uint64, n uint32) []byte {
	return binary.BigEndian.AppendUint32(AppendLogKey(dst, commit), n)
}

// LogPart returns the commit and part number of a change-log part key; ok
// is false when key is not one.
func LogPart(key []byte) (commit uint64, n uint32, ok bool) {
	if len(key) != LogPartKeyLen {
		return 0, 0, false
	}
	commit, ok = LogCommit(key[:LogKeyLen])
	return commit, binary.BigEndian.Uint32(key[LogKeyLen:]), ok
}

// appendNumberedKey appends prefix and n, 8 bytes big-endian, so that the
// keys of a prefix sort in the order of their numbers.
func appendNumberedKey(dst []byte, prefix string, n uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, prefix...), n)
}

// numberedKey returns the number of a key appendNumberedKey made with
// prefix; ok is false when key is not one.
func numberedKey(key []byte, prefix string) (n uint64, ok bool) {
	if len(key) != len(prefix)+8 || string(key[:len(prefix)]) != prefix {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[len(prefix):]), true
}

// AppendWrittenKey appends the write mark key of a type (WrittenPrefix).
func AppendWrittenKey(dst []byte, typeID uint32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, WrittenPrefix...), typeID)
}

// BuildKey returns the checkpoint key of the build of an index; its lock
// (store.Locker) is named by the same key.
func BuildKey(indexID uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte(BuildPrefix), indexID)
}

// AppendRecordPrefix appends the prefix of every record key of a type.
func AppendRecordPrefix(dst []byte, typeID uint32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, TagRecord), typeID)
}

// AppendIndexPrefix appends the prefix of every entry of an index.
func AppendIndexPrefix(dst []byte, indexID uint32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, TagIndex), indexID)
}

// RecordPrefix returns the prefix of every record key of a type.
func RecordPrefix(typeID uint32) []byte {
	return AppendRecordPrefix(make([]byte, 0, PrefixLen), typeID)
}

// IndexPrefix returns the prefix of every entry of an index.
func IndexPrefix(indexID uint32) []byte {
	return AppendIndexPrefix(make([]byte, 0, PrefixLen), indexID)
}

// AppendRecordKey appends the record key of a type's primary-key encoding
// pk (as IndexEntryPK returns it).
func AppendRecordKey(dst []byte, typeID uint32, pk []byte) []byte {
	return append(AppendRecordPrefix(dst, typeID), pk...)
}

// PrefixEnd returns the exclusive upper bound of the keys that start with
// prefix: the shortest key greater than every such key, or nil when there
// is none (prefix empty or all 0xff). For a tag-and-id prefix the
// increment never carries out of the id, as ids stay below 2^32-1.
func PrefixEnd(prefix []byte) []byte { return orderedcode.PrefixEnd(prefix) }

// Bounds returns [start, end): a range covering every key of every space,
// for whole-store operations such as a full compaction.
func Bounds() (start, end []byte) {
	return []byte{TagMeta}, PrefixEnd([]byte{TagIndex})
}

// ErrForeignKey reports a key that is not an entry of the index it was
// parsed as.
var ErrForeignKey = errors.New("keyspace: key is not an entry of this index")

// IndexEntryPK returns the primary-key encoding (the record key without its
// tag and type id) held in the key of a non-unique index entry: the suffix
// after the index key, whose fields have the key kinds ixKinds. It returns
// ErrForeignKey when key is not under indexID's prefix, and the
// internal/orderedcode error when the index key does not parse. The result aliases
// key. (A unique entry holds the pk in its value instead.)
func IndexEntryPK(key []byte, indexID uint32, ixKinds []orderedcode.Kind) ([]byte, error) {
	if len(key) < PrefixLen || key[0] != TagIndex || binary.BigEndian.Uint32(key[1:PrefixLen]) != indexID {
		return nil, ErrForeignKey
	}
	rest := key[PrefixLen:]
	for _, k := range ixKinds {
		var err error
		if rest, err = orderedcode.Skip(rest, k); err != nil {
			return nil, err
		}
	}
	return rest, nil
}

// SpanEnd returns the exclusive end of the span of the key space that key
// falls in, where a span is one region that grows on its own: the meta
// keys before the change log, the change log, the meta keys after it, and
// each record type and each index. nil means the rest of the key space.
// The store ends its sstables there, so that a table never straddles two
// spans: new keys at the end of one span (the next commit's log entry, a
// type's next primary key) then fall beyond every table below instead of
// into the one that reached into the next span. (The Pebble store cuts
// the spans of its own keys, under StorePrefix, itself.)
func SpanEnd(key []byte) []byte {
	if len(key) == 0 {
		return []byte(LogPrefix)
	}
	switch key[0] {
	case TagMeta:
		switch k := string(key); {
		case k < LogPrefix:
			return []byte(LogPrefix)
		case len(k) >= len(LogPrefix) && k[:len(LogPrefix)] == LogPrefix:
			return PrefixEnd([]byte(LogPrefix))
		default:
			return []byte{TagRecord}
		}
	case TagRecord, TagIndex:
		if len(key) < PrefixLen {
			// Not a key the engine writes: it sorts before every key of the
			// type or index its bytes begin, so its span ends there.
			return append(key[:len(key):len(key)], make([]byte, PrefixLen-len(key))...)
		}
		return PrefixEnd(key[:PrefixLen])
	}
	return nil
}
