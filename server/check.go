package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store/pebble"
)

// CheckReport is the outcome of Check: counts of what it read and every
// problem found (see engine.CheckReport).
type CheckReport = engine.CheckReport

// CheckProblem is one inconsistency of a CheckReport: its kind ("missing-entry",
// "dangling-entry", ...), the type and index, the store key and a detail.
type CheckProblem = engine.Problem

// Check verifies the data directory dataDir: every index entry points at a
// live record holding its value, every record has the entries of every
// READY index, and unique indexes hold one record per value. It opens the
// directory read-only, replaying a crashed server's log without writing, so
// no server may hold the directory meanwhile (the open then fails).
// Inconsistencies are in the report; an error means the directory could
// not be read.
func Check(ctx context.Context, dataDir string) (*CheckReport, error) {
	if dataDir == "" {
		return nil, errors.New("server: check: data directory is required")
	}
	return check(ctx, pebble.Options{Dir: dataDir, Layout: keyspace.Layout{}, ReadOnly: true})
}

// check is Check of the store o opens read-only.
func check(ctx context.Context, o pebble.Options) (*CheckReport, error) {
	dataDir := o.Dir
	st, err := pebble.Open(o)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", dataDir, err)
	}
	report, err := engine.Check(ctx, st)
	if cerr := st.Close(); err == nil && cerr != nil {
		return nil, fmt.Errorf("check %s: close store: %w", dataDir, cerr)
	}
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", dataDir, err)
	}
	return report, nil
}

// CheckEtcd is Check of the store on the etcd cluster e names, read at one
// revision while servers may go on writing.
func CheckEtcd(ctx context.Context, e EtcdConfig) (*CheckReport, error) {
	if err := (Config{DataDir: "-", Store: StoreEtcd, Etcd: e}).validateStorage(); err != nil {
		return nil, err
	}
	st, err := openEtcd(e, nil)
	if err != nil {
		return nil, fmt.Errorf("check etcd %v: %w", e.Endpoints, err)
	}
	defer st.Close()
	report, err := engine.Check(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("check etcd %v: %w", e.Endpoints, err)
	}
	return report, nil
}
