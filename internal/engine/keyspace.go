package engine

import "github.com/protobase/protobase/internal/keyspace"

// The meta keys as byte slices, converted once: keySeq is written with
// every batch. The layout itself is internal/keyspace's.
var (
	keySchema = []byte(keyspace.SchemaKey)
	keySeq    = []byte(keyspace.SeqKey)
	keySecret = []byte(keyspace.SecretKey)
	keyAPIKey = []byte(keyspace.APIKeyPrefix)
	// keyExpiryMark is rewritten by the reaper's batches on a shared
	// store (keyspace.ExpiryMarkKey).
	keyExpiryMark = []byte(keyspace.ExpiryMarkKey)
)
