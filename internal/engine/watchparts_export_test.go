package engine

import (
	"fmt"

	"github.com/protobase/protobase/internal/keyspace"
	"github.com/protobase/protobase/internal/store"
)

// LogPartBytes is the bound of every value the change log stores.
const LogPartBytes = logPartBytes

// RewriteLogEntryV1 stores the entry of commit c again as one value, the
// way a store written before entries were stored in parts holds it: the
// header and every change in the value under the commit's key.
func RewriteLogEntryV1(st store.KV, c uint64) error {
	it, err := st.NewIterator(logKey(c), logKey(c+1))
	if err != nil {
		return err
	}
	defer it.Close()
	if !it.First() {
		return fmt.Errorf("no entry of commit %d", c)
	}
	var p logParts
	le, err := readLogEntry(it, c, &p)
	if err != nil {
		return err
	}
	v := appendLogHeader(nil)
	copy(v[1:logHeaderSize], it.Value()[1:logHeaderSize])
	var ch logChange
	for {
		ok, err := le.next(&ch)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		v = appendLogChange(v, ch.op, ch.typeID, ch.rec, ch.old)
	}
	b := st.NewWriteBatch()
	defer b.Close()
	b.DeleteRange(logKey(c), logKey(c+1))
	b.Set(keyspace.AppendLogKey(nil, c), v)
	if err := st.ApplyBatch(b); err != nil {
		return err
	}
	return b.Wait()
}

// LogTimes returns the time of every change-log entry, oldest first.
func (e *Engine) LogTimes() []int64 {
	it, err := e.st.NewIterator(logStart, logEnd)
	if err != nil {
		panic(err)
	}
	defer it.Close()
	var out []int64
	for ok := it.First(); ok; ok = it.Next() {
		if _, part, _ := entryCommit(it.Key()); part {
			continue
		}
		h, err := readLogHead(it.Key(), it.Value())
		if err != nil {
			panic(err)
		}
		out = append(out, h.at)
	}
	return out
}
