package grpc

import (
	"os"
	"path/filepath"

	"google.golang.org/grpc"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/backup"
)

// BackupScratchPrefix starts the name of the directory a backup copy is
// taken into, inside Options.BackupScratch; a server removes leftovers
// (from a crash mid-backup) when it starts.
const BackupScratchPrefix = ".backup-"

// Backup implements pbgrpc.ProtobaseServer (an admin key with no scope: the
// copy holds every type). The copy is taken into a scratch directory on
// the data directory's file system, so that tables are hard links, not
// copies, streamed, and removed.
func (s *Service) Backup(_ *pb.BackupRequest, st grpc.ServerStreamingServer[pb.BackupChunk]) error {
	id, err := s.require(st.Context(), auth.RoleAdmin)
	if err != nil {
		return err
	}
	if id.Scoped() {
		return toStatus(apierror.New(apierror.PermissionDenied, "a backup copies every record type: it needs an admin key without a scope"))
	}
	if s.opts.BackupScratch == "" && s.e.Store().Shared() {
		// The store is the etcd cluster's, which every server shares: a
		// copy is the cluster's business, or a logical one of the records.
		return toStatus(apierror.New(apierror.Unimplemented, "a server on etcd does not copy its store: back up the etcd cluster "+
			"(etcdctl snapshot save), or this database's schema and records (protobase export); see docs/scaling.md"))
	}
	if s.opts.BackupScratch == "" {
		return toStatus(apierror.New(apierror.Unimplemented, "this server cannot take backups"))
	}
	s.backups.Add(1)
	defer s.backups.Add(-1)
	tmp, err := os.MkdirTemp(s.opts.BackupScratch, BackupScratchPrefix)
	if err != nil {
		return toStatus(apierror.Wrap(apierror.Internal, err))
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "copy")
	pt, err := s.e.Checkpoint(dir)
	if err != nil {
		return toStatus(err)
	}
	s.log.Info("backup copy taken", "position", pt.Position, "schema_version", pt.SchemaVersion)
	// Each chunk re-checks the key: a key revoked meanwhile stops the copy.
	send := func(c *pb.BackupChunk) error {
		if err := id.Check(); err != nil {
			return err
		}
		return st.Send(c)
	}
	err = backup.Stream(dir, backup.Point{Store: "pebble", Position: pt.Position, SchemaVersion: pt.SchemaVersion}, send)
	if err != nil {
		return toStatus(err)
	}
	return nil
}
