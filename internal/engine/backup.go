package engine

import (
	"errors"

	"github.com/protobase/protobase/internal/apierror"
)

// BackupPoint is where a backup copy stands.
type BackupPoint struct {
	// Position is the commit position of the copy: every batch applied at
	// a position up to it is in the copy, none after.
	Position      uint64
	SchemaVersion uint64
}

// checkpointer is a store that can copy itself consistently (Pebble).
type checkpointer interface {
	Checkpoint(dir string) error
}

// Checkpoint writes a consistent copy of the store into dir (which must
// not exist) and returns its position. Writes, schema changes and index
// build steps wait for the copy (it holds writeMu, so no batch is half
// applied and the position is exact); Pebble's checkpoint hard-links the
// tables and copies the log, milliseconds for most stores.
func (e *Engine) Checkpoint(dir string) (BackupPoint, error) {
	cp, ok := any(e.st).(checkpointer)
	if !ok {
		return BackupPoint{}, apierror.New(apierror.Unimplemented, "this storage backend cannot take a backup copy")
	}
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	pt := BackupPoint{Position: e.writeMu.seq, SchemaVersion: e.cat.Load().state.Version}
	if err := cp.Checkpoint(dir); err != nil {
		return BackupPoint{}, errors.Join(errors.New("backup copy"), err)
	}
	return pt, nil
}
