package grpcbuf

import "google.golang.org/grpc/mem"

// Held is a message sent together with something to give back once gRPC
// no longer holds the message's bytes: a codec that knows it (the
// server's) marshals Msg and appends Releaser(Pool), so that when gRPC
// frees the message's buffers — it has written them to the connection,
// or dropped them with the stream — Pool.Put runs.
type Held struct {
	Msg  any
	Pool mem.BufferPool
}

// releaseData backs every release buffer: an empty slice whose capacity
// is over grpc-go's pooling threshold (1 KiB), so that mem.NewBuffer makes a
// reference-counted buffer that calls its pool's Put when freed, not a
// plain slice. Its bytes are never read or written.
var releaseData = make([]byte, 0, 4<<10)

// Releaser returns an empty buffer whose pool is pool: appended after a
// message's last buffer, it is freed — and pool.Put called with a
// pointer to an empty slice — once gRPC has freed everything before it.
func Releaser(pool mem.BufferPool) mem.Buffer {
	d := releaseData
	return mem.NewBuffer(&d, pool)
}
