package server

import (
	"os"
	"path/filepath"

	grpctransport "github.com/protobase/protobase/internal/transport/grpc"
)

// backupScratch returns where Backup takes its copies (the data directory,
// so that tables are hard-linked), after removing what a backup cut short
// by a crash left there. None for a store held in memory or in etcd (whose
// own snapshots are its backups).
func backupScratch(cfg Config) string {
	if cfg.memFS != nil || cfg.Store == StoreEtcd {
		return ""
	}
	old, _ := filepath.Glob(filepath.Join(cfg.DataDir, grpctransport.BackupScratchPrefix+"*"))
	for _, dir := range old {
		_ = os.RemoveAll(dir)
	}
	return cfg.DataDir
}
