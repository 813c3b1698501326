package etcd

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/stats"
)

// sendWatch is a gRPC stats handler on the store's connection that tells
// a commit whose request never left this process from one that did. etcd's
// client waits for a ready connection (WaitForReady), so a commit to a
// cluster it cannot reach fails with the same deadline as one sent and
// never answered; only the second may have been applied.
type sendWatch struct{}

// sentKey is the context key of the *atomic.Bool that sendWatch sets once
// the request of the call carrying it is handed to a connection.
type sentKey struct{}

// watchSend returns ctx carrying a flag that is set once a call made with
// it has handed its request to a connection.
func watchSend(ctx context.Context) (context.Context, *atomic.Bool) {
	sent := new(atomic.Bool)
	return context.WithValue(ctx, sentKey{}, sent), sent
}

func (sendWatch) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.OutPayload); !ok {
		return
	}
	if sent, ok := ctx.Value(sentKey{}).(*atomic.Bool); ok {
		sent.Store(true)
	}
}

func (sendWatch) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (sendWatch) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (sendWatch) HandleConn(context.Context, stats.ConnStats)                       {}
