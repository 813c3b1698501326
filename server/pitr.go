package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/backup"
	"github.com/protobase/protobase/internal/changelog"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
)

// PointInTime is a restore of the backup Base brought forward by the
// change log of the later backup Later, up to a position or a time.
type PointInTime struct {
	Base, Later string
	DataDir     string
	// ToPosition, when not zero, is the last commit replayed.
	ToPosition uint64
	// ToTime, when not zero, is the last commit time replayed: no entry
	// committed after it is.
	ToTime time.Time
}

// PointInTimeResult is where a point-in-time restore stopped.
type PointInTimeResult struct {
	Base *pb.BackupManifest
	// Position is the last commit the restored store holds, At its
	// commit time (zero when no entry was replayed).
	Position uint64
	At       time.Time
	Entries  int
	Changes  int
}

// replayRetention keeps the restored store's change log (Base's entries
// and the replayed ones) while the replay runs; the server that later
// opens the store trims it by its own retention.
const replayRetention = 100 * 365 * 24 * time.Hour

// RestoreToPoint restores p.Base into p.DataDir and replays p.Later's
// change log from Base's position on, through the engine's write path.
// Everything that can be refused (a later backup older than the base, a
// schema change between them, a target before the base, a log that does
// not reach back to the base's position) is refused before DataDir is
// written.
func RestoreToPoint(ctx context.Context, p PointInTime) (PointInTimeResult, error) {
	res, err := restoreToPoint(ctx, p)
	if err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	return res, nil
}

func restoreToPoint(ctx context.Context, p PointInTime) (PointInTimeResult, error) {
	base, later, err := pointManifests(p)
	if err != nil {
		return PointInTimeResult{}, err
	}
	res := PointInTimeResult{Base: base, Position: base.GetPosition()}
	parent := filepath.Dir(filepath.Clean(p.DataDir))
	if err := os.MkdirAll(parent, 0o750); err != nil {
		return res, err
	}
	tmp, err := os.MkdirTemp(parent, ".protobase-log-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	if _, err := backup.Restore(p.Later, tmp); err != nil {
		return res, fmt.Errorf("--log-from: %w", unprefixed(err))
	}
	src, err := pebble.Open(pebble.Options{Dir: tmp, Layout: keyspace.Layout{}, ReadOnly: true})
	if err != nil {
		return res, fmt.Errorf("open the store of %s: %w", p.Later, err)
	}
	defer src.Close()
	log, err := changelog.Open(src, later.GetPosition(), changelog.Options{Retention: replayRetention})
	if err != nil {
		return res, fmt.Errorf("open the change log of %s: %w", p.Later, err)
	}
	if err := logCovers(log, base, later, p.Later); err != nil {
		return res, err
	}
	if _, err := backup.Restore(p.Base, p.DataDir); err != nil {
		return res, unprefixed(err)
	}
	if err := replayInto(ctx, p, log, later, &res); err != nil {
		return res, fmt.Errorf("%w\n(%s holds the base with commits up to %d replayed; remove it before restoring again)",
			err, p.DataDir, res.Position)
	}
	return res, nil
}

// unprefixed drops the "backup: " or "restore: " the backup package puts
// before its errors: RestoreToPoint's errors read as a restore's, once.
func unprefixed(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// pointManifests reads both manifests and refuses a span they cannot
// make: a later backup older than the base, a schema change between
// them (the change log does not record schema changes), a target before
// the base or past the later backup.
func pointManifests(p PointInTime) (base, later *pb.BackupManifest, err error) {
	if base, err = backup.ReadManifest(p.Base); err != nil {
		return nil, nil, fmt.Errorf("--from: %w", unprefixed(err))
	}
	if later, err = backup.ReadManifest(p.Later); err != nil {
		return nil, nil, fmt.Errorf("--log-from: %w", unprefixed(err))
	}
	desc := func(name string, m *pb.BackupManifest) string {
		return fmt.Sprintf("%s (position %d, taken %s, schema version %d)", name, m.GetPosition(), m.GetCreated(), m.GetSchemaVersion())
	}
	switch {
	case later.GetPosition() < base.GetPosition():
		return nil, nil, fmt.Errorf("the backup %s is older than the base %s", desc(p.Later, later), desc(p.Base, base))
	case later.GetSchemaVersion() != base.GetSchemaVersion():
		return nil, nil, fmt.Errorf("the schema changed between the base %s and %s; the change log does not record schema changes, so no replay crosses one: restore the backup taken after the change, or the base alone",
			desc(p.Base, base), desc(p.Later, later))
	case p.ToPosition != 0 && p.ToPosition < base.GetPosition():
		return nil, nil, fmt.Errorf("--to-position %d is before the base %s", p.ToPosition, desc(p.Base, base))
	case p.ToPosition > later.GetPosition():
		return nil, nil, fmt.Errorf("--to-position %d is after the last commit of %s", p.ToPosition, desc(p.Later, later))
	}
	if !p.ToTime.IsZero() {
		taken, err := time.Parse(time.RFC3339Nano, base.GetCreated())
		if err != nil {
			return nil, nil, fmt.Errorf("--from: the manifest's time %q does not read: %w", base.GetCreated(), err)
		}
		if p.ToTime.Before(taken) {
			return nil, nil, fmt.Errorf("--to-time %s is before the base %s", p.ToTime.UTC().Format(time.RFC3339Nano), desc(p.Base, base))
		}
	}
	return base, later, nil
}

// logCovers refuses a change log that does not hold every commit after
// the base's position: trimmed by the server's --watch-retention or
// --watch-retention-bytes, or the log was off.
func logCovers(log *changelog.Log, base, later *pb.BackupManifest, name string) error {
	need := base.GetPosition() + 1
	if need > later.GetPosition() {
		return nil // nothing to replay
	}
	first, ok, err := log.First()
	if err != nil {
		return fmt.Errorf("read the change log of %s: %w", name, err)
	}
	if !ok {
		return fmt.Errorf("the backup %s holds no change log (its server ran with --watch-retention 0?): commits %d to %d after the base's position %d cannot be replayed",
			name, need, later.GetPosition(), base.GetPosition())
	}
	if first <= need {
		return nil
	}
	at := "at an unknown time"
	if t, _, err := entryStamp(log, first); err == nil {
		at = "committed " + time.Unix(0, t).UTC().Format(time.RFC3339Nano)
	}
	return fmt.Errorf("the change log of %s begins at commit %d (%s), after the base's position %d (taken %s): commits %d to %d were trimmed by the server's --watch-retention or --watch-retention-bytes; restore a later base, or the base alone",
		name, first, at, base.GetPosition(), base.GetCreated(), need, first-1)
}

// entryStamp reads the commit time and size of commit c's entry:
// together they tell one store's entry from another's.
func entryStamp(log *changelog.Log, c uint64) (at int64, size int, err error) {
	r := log.NewReader(nil)
	defer r.Close()
	r.Round(c, c)
	if !r.More() {
		return 0, 0, changelog.ErrGap
	}
	_, ent, err := r.Next()
	if err != nil {
		return 0, 0, err
	}
	if ent == nil {
		return 0, 0, errors.Join(changelog.ErrGap, r.Err())
	}
	return ent.Time(), ent.Size(), nil
}

// sameStore refuses a later backup of another store: when both logs
// hold the entry of the base's position, they must hold the same one.
func sameStore(base, later *changelog.Log, pos uint64, laterName string) error {
	if pos == 0 {
		return nil
	}
	bt, bs, err := entryStamp(base, pos)
	if errors.Is(err, changelog.ErrGap) {
		return nil // the base kept no log
	}
	if err != nil {
		return err
	}
	lt, ls, err := entryStamp(later, pos)
	if errors.Is(err, changelog.ErrGap) {
		return nil // trimmed to the commit after it
	}
	if err != nil {
		return err
	}
	if bt != lt || bs != ls {
		return fmt.Errorf("the backup %s is not of the base's store: its commit %d was committed %s, the base's %s",
			laterName, pos, time.Unix(0, lt).UTC().Format(time.RFC3339Nano), time.Unix(0, bt).UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// replayInto opens the restored store and replays the log up to the
// target, with the engine's clock at each entry's time.
func replayInto(ctx context.Context, p PointInTime, log *changelog.Log, later *pb.BackupManifest, res *PointInTimeResult) error {
	st, err := pebble.Open(pebble.Options{Dir: p.DataDir, Layout: keyspace.Layout{}, Sync: true})
	if err != nil {
		return err
	}
	var at atomic.Int64
	at.Store(time.Now().UnixNano())
	eng, err := engine.Open(ctx, st, engine.Options{
		WatchRetention: replayRetention, ReapInterval: -1,
		MaxRecordsPerBatch: 1 << 30, MaxInflightBytes: 1 << 40,
		Now: func() time.Time { return time.Unix(0, at.Load()) },
	})
	if err != nil {
		return errors.Join(err, st.Close())
	}
	if err := sameStore(eng.ChangeLog(), log, res.Position, p.Later); err != nil {
		return errors.Join(err, eng.Close(), st.Close())
	}
	span := engine.ReplaySpan{From: res.Position + 1, To: later.GetPosition(), At: at.Store}
	if p.ToPosition != 0 {
		span.To = p.ToPosition
	}
	if !p.ToTime.IsZero() {
		span.Until = p.ToTime.UnixNano()
	}
	done, err := eng.Replay(ctx, log, span)
	res.Position, res.Entries, res.Changes = done.Position, done.Entries, done.Changes
	if done.At != 0 {
		res.At = time.Unix(0, done.At).UTC()
	}
	return errors.Join(err, eng.Close(), st.Close())
}
