package changelog

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
)

// Problem is something wrong with the log that Check found.
type Problem struct {
	// Gap says the entries' commits are not consecutive, or go past the
	// last commit; else an entry (or one of its parts) does not read, or
	// a key in the log is no entry's.
	Gap    bool
	Key    []byte
	Detail string
}

// Check reads the log in v: every entry to its last change (its parts
// included), and the entries' commits, which must be consecutive and
// none past last, the last commit. It reports each problem and returns
// how many entries it read. Its error is the store's (a damaged block),
// or ctx's.
func Check(ctx context.Context, v store.View, last uint64, report func(Problem)) (uint64, error) {
	it, err := v.NewIterator(logStart, logEnd)
	if err != nil {
		return 0, fmt.Errorf("check: iterate the change log: %w", err)
	}
	defer it.Close()
	var p parts
	var entries, prev uint64
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return entries, err
		}
		key := it.Key()
		commit, isKey := keyspace.LogCommit(key)
		if !isKey {
			report(Problem{Key: bytes.Clone(key), Detail: "a key in the change log that is no entry's (a part without its entry?)"})
			continue
		}
		switch {
		case entries > 0 && commit != prev+1:
			report(Problem{Gap: true, Key: bytes.Clone(key), Detail: fmt.Sprintf("entry of commit %d follows commit %d", commit, prev)})
		case commit > last:
			report(Problem{Gap: true, Key: bytes.Clone(key), Detail: fmt.Sprintf("entry of commit %d is past the last commit %d", commit, last)})
		}
		entries++
		prev = commit
		if err := checkEntry(it, commit, &p, report); err != nil {
			return entries, fmt.Errorf("check: read the change log entry of commit %d: %w", commit, err)
		}
	}
	if err := it.Error(); err != nil {
		return entries, fmt.Errorf("check: iterate the change log: %w", err)
	}
	return entries, nil
}

// checkEntry reads every change of the entry of commit under the
// iterator, reporting a malformed one as a problem; the error is
// storage's.
func checkEntry(it store.Iterator, commit uint64, p *parts, report func(Problem)) error {
	key := bytes.Clone(it.Key())
	le, err := readEntry(it, commit, p)
	var ch Change
	for err == nil {
		var more bool
		if more, err = le.Next(&ch); !more {
			break
		}
	}
	if errors.Is(err, errMalformed) {
		report(Problem{Key: key, Detail: fmt.Sprintf("entry of commit %d: %v", commit, err)})
		err = nil
	}
	if err != nil {
		return err
	}
	if le.parts == nil {
		return nil
	}
	if err := le.parts.done(); err != nil && !errors.Is(err, errMalformed) {
		return err
	}
	return nil
}
