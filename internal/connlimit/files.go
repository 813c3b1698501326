package connlimit

// The default cap follows the process's file-descriptor limit: each open
// connection is a descriptor, and so is each file the store keeps open.
const (
	// StoreFiles is the room left for the store and the rest of the
	// process: Pebble keeps up to 1,000 table files open per instance
	// (the store runs two: records and index entries), beside its
	// write-ahead logs, manifests and the process's own descriptors.
	StoreFiles = 3000
	// Listeners is how many listeners the descriptors left are shared
	// by: gRPC, REST, metrics and the embedded NATS server may each hold
	// the cap, whichever of them run.
	Listeners = 4
	// MaxDefault bounds the default cap where descriptors are plentiful:
	// an idle TLS connection holds about 50 KB of buffers, so 10,000 of
	// them on one listener hold about 0.5 GB.
	MaxDefault = 10_000
)

// Default returns the default cap of one listener for a process whose
// file-descriptor limit is files (0: unknown): a quarter of what the
// limit leaves after the store's files (half the limit, if that is more),
// at most MaxDefault.
func Default(files uint64) int {
	if files == 0 {
		return MaxDefault
	}
	room := files / 2
	if files > StoreFiles {
		room = max(room, files-StoreFiles)
	}
	return int(max(min(room/Listeners, MaxDefault), 1)) //nolint:gosec // at most MaxDefault
}
