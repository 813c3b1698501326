package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/backup"
)

// Backup asks the server for a consistent copy of its store (an admin key
// without a scope, when auth is on) and writes it into dir, which must be
// empty or absent. Every file is checked against the manifest the server
// sends last; manifest.json is written only then, so a directory with a
// manifest is a complete backup. It returns the manifest: the copy's
// commit position and schema version.
func (c *Client) Backup(ctx context.Context, dir string) (*pb.BackupManifest, error) {
	rcv, err := backup.NewReceiver(dir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.api.Backup(ctx, &pb.BackupRequest{})
	if err != nil {
		return nil, asError(err)
	}
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			rcv.Abort()
			return nil, errors.New("backup: the stream ended without a manifest")
		}
		if err != nil {
			rcv.Abort()
			return nil, asError(err)
		}
		switch ch := chunk.GetChunk().(type) {
		case *pb.BackupChunk_Data:
			if err := rcv.Data(ch.Data); err != nil {
				rcv.Abort()
				return nil, err
			}
		case *pb.BackupChunk_Manifest:
			if err := rcv.Finish(ch.Manifest); err != nil {
				return nil, err
			}
			return ch.Manifest, nil
		default:
			rcv.Abort()
			return nil, fmt.Errorf("backup: unknown chunk %T", ch)
		}
	}
}
