package watch

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Watchers that ask for the same changes (the same types, filter and
// old_records, compiled against the same schema version) share the
// encoded changes of each log entry: the first to read an entry filters
// and encodes its changes and publishes them; the others copy the bytes
// into their responses, without looking at a record. The work of ten
// such watchers is then one watcher's plus nine copies. Batching stays
// each watcher's own, so responses are the same bytes as without sharing.
//
// Memory: the entries kept total at most shareBytes (oldest evicted
// first, whether or not a watcher still shares their key), and an entry
// is added only while two watchers or more share its key. An entry larger
// than a quarter of that is not kept.
const shareBytes = 16 << 20

// shareCache is the service's cache of shared entries. Published entries
// are immutable and may be read without its lock.
type shareCache struct {
	// mu guards the cache's state.
	mu struct {
		sync.Mutex
		refs    map[string]int // watchers per share key
		entries map[shareKey]*sharedEntry
		order   []shareKey // insertion order, for eviction
		bytes   int
	}
}

type shareKey struct {
	cfg    string
	commit uint64
}

// sharedEntry is the matching changes of one log entry for one share
// key: their Change fields (WatchResponse field 1) back to back.
type sharedEntry struct {
	b   []byte
	chs []sharedChange
}

type sharedChange struct {
	index uint32
	end   int // of its bytes in b; it starts where the previous ends
	cost  int // what it adds to a response's size (record bytes)
}

// shareKeyOf returns the key watchers asking for the same changes as req
// share; ver is the schema version the request was compiled against.
func shareKeyOf(req *pb.WatchRequest, ver uint64) string {
	types := slices.Clone(req.GetTypes())
	slices.Sort(types)
	types = slices.Compact(types)
	var sb strings.Builder
	sb.WriteString(strconv.FormatUint(ver, 10))
	sb.WriteByte(0)
	sb.WriteString(strconv.FormatBool(req.GetOldRecords()))
	for _, t := range types {
		sb.WriteByte(0)
		sb.WriteString(t)
	}
	sb.WriteByte(1)
	sb.WriteString(req.GetFilter())
	if where := req.GetWhere(); where != nil {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(where)
		if err != nil {
			return "" // not shared
		}
		sb.WriteByte(2)
		sb.Write(b)
	}
	return sb.String()
}

// join counts a watcher of key in.
func (s *shareCache) join(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.refs == nil {
		s.mu.refs, s.mu.entries = map[string]int{}, map[shareKey]*sharedEntry{}
	}
	s.mu.refs[key]++
}

// leave counts a watcher of key out; the entries of a key left with no
// watcher stay until evicted.
func (s *shareCache) leave(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.refs[key]--; s.mu.refs[key] <= 0 {
		delete(s.mu.refs, key)
	}
}

// get returns the entry of commit c for key, or nil; fill says the caller
// should build and publish it (another watcher shares key).
func (s *shareCache) get(key string, c uint64) (e *sharedEntry, fill bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.mu.entries[shareKey{key, c}]; e != nil {
		return e, false
	}
	return nil, s.mu.refs[key] > 1
}

// put publishes e, evicting the oldest entries (and those of keys no
// watcher holds) to stay within shareBytes.
func (s *shareCache) put(key string, c uint64, e *sharedEntry) {
	if len(e.b) > shareBytes/4 {
		return
	}
	if cap(e.b) > len(e.b)+len(e.b)/4 {
		e.b = slices.Clone(e.b) // keep what it holds, not its estimate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := shareKey{key, c}
	if s.mu.entries[k] != nil || s.mu.refs[key] < 2 {
		return
	}
	for len(s.mu.order) > 0 && s.mu.bytes+len(e.b) > shareBytes {
		old := s.mu.order[0]
		s.mu.order = s.mu.order[1:]
		if oe := s.mu.entries[old]; oe != nil {
			s.mu.bytes -= len(oe.b)
			delete(s.mu.entries, old)
		}
	}
	s.mu.entries[k] = e
	s.mu.order = append(s.mu.order, k)
	s.mu.bytes += len(e.b)
}
