// Package fetch is the lab's fetch experiment (seed 004): fetch every
// user whose name contains a keyword, by unary Query pages, by Scan with
// parallelism, and by emulated offset paging.
package fetch

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/bench"
	"github.com/protobase/protobase/client"
	labv1 "github.com/protobase/protobase/gen/protobase/lab/v1"
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

func init() { bench.Register(func() bench.Experiment { return new(Experiment) }) }

// Experiment is seed 004: fetch every user whose name contains a keyword,
// ordered by id descending, from a generated users table, by unary Query
// pages with continuation tokens, by one server-streaming Scan with
// parallelism 1, 10 and 100, and by offset paging emulated on the client
// (the seed's LIMIT/OFFSET method, each page re-reading everything before
// it). Every method must return exactly the ids the generator says match,
// in descending order; a run that does not fails the experiment.
type Experiment struct {
	Users       []int
	Keyword     string
	Page        int
	Seed        uint64
	OffsetLimit time.Duration

	// served is what the server did for each method (see served).
	served served
}

// Name implements bench.Experiment.
func (*Experiment) Name() string { return "fetch" }

// Describe implements bench.Experiment.
func (*Experiment) Describe() string {
	return "fetch all users whose name contains a keyword: Query pages vs Scan with parallelism 1/10/100 vs offset paging (seed 004)"
}

// Flags implements bench.Experiment.
func (f *Experiment) Flags(fs *pflag.FlagSet) {
	fs.IntSliceVar(&f.Users, "users", nil, "users generated, one data set per value (default 110000; 5000 with --quick; the seed's large case is 1100000)")
	fs.StringVar(&f.Keyword, "keyword", "", `name keyword (default "ff", as the seed for 110K users; "e" for 1M users or more and with --quick)`)
	fs.IntVar(&f.Page, "page", 0, "rows per page, per Scan batch and per offset page (0: 1000, as the seed)")
	fs.Uint64Var(&f.Seed, "seed", 4, "seed of the users generator")
	fs.DurationVar(&f.OffsetLimit, "offset-limit", 0, "time limit of one offset-paging fetch, reported as not finished beyond it (default 60s; 5s with --quick)")
}

// Seed 004's shares: 18,081 of 110K names contain "ff", 1,039,693 of 1.1M
// contain "e". The generator draws names with these shares.
const (
	seedShareFF = 18081.0 / 110000
	seedShareE  = 1039693.0 / 1100000
)

// seed004 are the seed's seconds per method, by users generated (with
// the seed's keyword for that size).
var seed004 = map[int]map[string]float64{
	110000:  {"pages": 5.729, "offset": 5.729, "scan p=1": 5.767, "scan p=10": 2.087, "scan p=100": 1.955},
	1100000: {"pages": 191.7, "offset": 191.7, "scan p=1": 190.0, "scan p=10": 41.81, "scan p=100": 39.55},
}

// seed004Rows are the rows the seed's query matched, by users generated.
var seed004Rows = map[int]float64{110000: 18081, 1100000: 1039693}

const seed004Source = "seed 004 (MySQL behind gRPC, Go client, 16 threads, localhost; pages = LIMIT/OFFSET)"

// seedKeyword is the keyword the seed used for a table of n users.
func seedKeyword(n int) string {
	if n >= 1000000 {
		return "e"
	}
	return "ff"
}

func (f *Experiment) defaults(quick bool) error {
	if len(f.Users) == 0 {
		f.Users = []int{110000}
		if quick {
			f.Users = []int{5000}
		}
	}
	if f.Page == 0 {
		f.Page = 1000
	}
	if f.OffsetLimit == 0 {
		f.OffsetLimit = time.Minute
		if quick {
			f.OffsetLimit = 5 * time.Second
		}
	}
	if quick && f.Keyword == "" {
		// "ff" matches ~800 of 5,000 users: less than one page. "e"
		// matches several pages, so quick runs exercise the tokens.
		f.Keyword = "e"
	}
	switch {
	case f.Page < 1 || f.Page > 10000:
		return fmt.Errorf("--page must be in 1..10000, got %d", f.Page)
	case f.OffsetLimit < 0:
		return fmt.Errorf("--offset-limit must not be negative, got %v", f.OffsetLimit)
	}
	for _, n := range f.Users {
		if n < 1 || n > 100000000 {
			return fmt.Errorf("--users: %d is out of range 1..100000000", n)
		}
	}
	return nil
}

// The users table, as the seed's (users.proto; times as microseconds
// since the epoch).
//
//go:embed users.proto
var usersProto string

const (
	usersProtoFile = "protobase_lab/users.proto"
	userType       = "protobase_lab.User"
)

var usersSchema = map[string]string{usersProtoFile: usersProto}

// Name parts, sorted by whether they contain "ff" and "e" (case-sensitive,
// as OP_CONTAINS is), so that the generator can choose the keyword shares
// and still produce plausible names. Given names never contain "ff", and a
// space separates the parts, so a name contains "ff" exactly when its
// family name does. TestUserNameParts checks the classes.
var (
	givenNoE   = []string{"Anna", "John", "Maria", "Omar", "Priya", "Hugo", "Ivan", "Noah", "Mia", "Sofia", "Liam", "Aisha", "Carlos", "Yuki", "Ravi", "Nina", "Paul", "Lara", "Olga", "Emma", "Ali", "Luis", "Ming", "David"}
	givenWithE = []string{"Peter", "Elena", "James", "Grace", "Helen", "Oliver", "Chloe", "Mateo", "Lee", "Irene", "Steve", "Daniel", "Sven", "Jane", "Renee", "Diego"}
	// familyNames[ff][e] are family names with ("ff") or without "ff", and
	// with or without "e".
	familyNames = [2][2][]string{
		{
			{"Smith", "Kim", "Silva", "Kowalski", "Tanaka", "Garcia", "Rossi", "Wang", "Novak", "Santos", "Ivanov", "Murphy", "Sato", "Costa", "Lind", "Horvat", "Singh", "Park", "Diaz"},
			{"Becker", "Nguyen", "Perez", "Weber", "Fischer", "Moreno", "Peters", "Bennett", "Reyes", "Meyer", "Keller", "Hughes", "Lopez", "Schneider", "Green", "Walker"},
		},
		{
			{"Griffin", "Stafford", "Huffman", "Moffat", "Duffy", "Clifford", "Ratcliff", "Chaffin", "Tiffany", "Pfaff"},
			{"Jeffries", "Steffen", "Coffey", "Schaeffer", "Effendi", "Joffe", "Haffner", "Buffett", "Giffen", "Offerman"},
		},
	}
)

// user is one generated row.
type user struct {
	id                   int64
	name, email          string
	createdAt, updatedAt int64
}

// userGen generates the users table: user i (1-based) is the i-th draw of
// a PCG seeded with seed, so a table is the same on every run and each
// prefix of a larger table is the smaller one.
type userGen struct {
	r    *rand.Rand
	next int64
}

func newUserGen(seed uint64) *userGen {
	return &userGen{r: rand.New(rand.NewPCG(seed, 0x5eed0004)), next: 1}
}

// user draws the next user. Whether its name contains "ff" and "e" are
// drawn first, with the seed's shares, then parts of those classes: a name
// without "e" takes an e-less given name and family name; a name with "e"
// takes any given name and, when the given name has no "e", a family name
// with one.
func (g *userGen) user() user {
	r := g.r
	ff := b2i(r.Float64() < seedShareFF)
	var given, family string
	if r.Float64() < seedShareE {
		if i := r.IntN(len(givenNoE) + len(givenWithE)); i < len(givenNoE) {
			given = givenNoE[i]
			family = pick(r, familyNames[ff][1])
		} else {
			given = givenWithE[i-len(givenNoE)]
			family = pick(r, familyNames[ff][r.IntN(2)])
		}
	} else {
		given, family = pick(r, givenNoE), pick(r, familyNames[ff][0])
	}
	u := user{id: g.next, name: given + " " + family}
	u.email = strings.ToLower(given) + "." + strings.ToLower(family) + strconv.FormatInt(u.id, 10) + "@example.com"
	u.createdAt = 1500000000_000000 + r.Int64N(200_000_000_000000)
	u.updatedAt = u.createdAt + r.Int64N(30_000_000_000000)
	g.next++
	return u
}

func pick(r *rand.Rand, s []string) string { return s[r.IntN(len(s))] }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// appendUser appends u's encoding as a protobase_lab.User.
func appendUser(dst []byte, u user) []byte {
	dst = protowire.AppendTag(dst, 1, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(u.id))
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendString(dst, u.name)
	dst = protowire.AppendTag(dst, 3, protowire.BytesType)
	dst = protowire.AppendString(dst, u.email)
	dst = protowire.AppendTag(dst, 4, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(u.createdAt))
	dst = protowire.AppendTag(dst, 5, protowire.VarintType)
	return protowire.AppendVarint(dst, uint64(u.updatedAt))
}

// loadUsers upserts users 1..n and returns, ascending, the ids of those
// whose name contains keyword: what every method must return. It fails if
// the server holds other users (an --addr server loaded with a larger
// table), since the query would then match more than the generator says.
func loadUsers(ctx context.Context, p bench.Progress, t *bench.Target, n int, seed uint64, keyword string) ([]int64, error) {
	const batch = 1000
	task := p.Task(fmt.Sprintf("load %d users", n), (n+batch-1)/batch)
	defer task.Done("")
	st, err := t.API.Upsert(ctx)
	if err != nil {
		return nil, fmt.Errorf("load users: open stream: %w", err)
	}
	gen := newUserGen(seed)
	var want []int64
	for first := 0; first < n; first += batch {
		m := min(batch, n-first)
		req := &pb.WriteRequest{Records: make([]*anypb.Any, m)}
		backing := make([]byte, 0, m*96)
		for i := range req.Records {
			u := gen.user()
			if strings.Contains(u.name, keyword) {
				want = append(want, u.id)
			}
			start := len(backing)
			backing = appendUser(backing, u)
			req.Records[i] = &anypb.Any{TypeUrl: bench.TypeURLPrefix + userType, Value: backing[start:len(backing):len(backing)]}
		}
		if err := st.Send(req); err != nil {
			break // the status says why
		}
		task.Step()
	}
	if _, err := st.CloseAndRecv(); err != nil {
		return nil, fmt.Errorf("load users: %w", err)
	}
	sc := t.Client.Scan(ctx, &pb.Query{Type: userType, Count: true}, client.ScanOptions{})
	for sc.Next() {
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("count users: %w", err)
	}
	if got := sc.Count(); got != uint64(n) {
		return nil, fmt.Errorf("server holds %d users, %d loaded: use a fresh server", got, n)
	}
	return want, nil
}

// fetchQuery is the seed's query: name LIKE '%keyword%' ORDER BY id DESC.
func fetchQuery(keyword string) *pb.Query {
	return &pb.Query{
		Type: userType,
		Where: &pb.Expr{Expr: &pb.Expr_Cmp{Cmp: &pb.Comparison{
			Field: "name", Op: pb.Op_OP_CONTAINS, Value: &pb.Value{Kind: &pb.Value_String_{String_: keyword}},
		}}},
		Order: &pb.Order{Descending: true},
	}
}

// fetchMethod fetches every match of q and appends their ids, in the
// order received, to ids.
type fetchMethod struct {
	name string
	// parallelism is the Scan's, 0 for the unary methods.
	parallelism int
	fetch       func(ctx context.Context, c *client.Client, q *pb.Query, page int, ids []int64) ([]int64, error)
}

var fetchMethods = []fetchMethod{
	{name: "pages", fetch: fetchPages},
	{name: "scan p=1", parallelism: 1, fetch: scanFetch(1)},
	{name: "scan p=10", parallelism: 10, fetch: scanFetch(10)},
	{name: "scan p=100", parallelism: 100, fetch: scanFetch(100)},
	{name: "offset", fetch: fetchOffset},
}

// fetchPages walks Query pages with continuation tokens: each page resumes
// where the last ended, so the server reads every row once.
func fetchPages(ctx context.Context, c *client.Client, q *pb.Query, page int, ids []int64) ([]int64, error) {
	err := c.Pages(ctx, q, uint32(page), func(p *client.Page) bool {
		ids = appendIDs(ids, p.Records)
		return true
	})
	if err != nil {
		return ids, fmt.Errorf("query pages: %w", err)
	}
	return ids, nil
}

// scanFetch streams every match through one Scan.
func scanFetch(par int) func(context.Context, *client.Client, *pb.Query, int, []int64) ([]int64, error) {
	return func(ctx context.Context, c *client.Client, q *pb.Query, page int, ids []int64) ([]int64, error) {
		sc := c.Scan(ctx, q, client.ScanOptions{Parallelism: uint32(par), BatchSize: uint32(page)})
		defer sc.Close()
		for sc.Next() {
			ids = appendID(ids, sc.Record())
		}
		if err := sc.Err(); err != nil {
			return ids, fmt.Errorf("scan: %w", err)
		}
		return ids, nil
	}
}

// fetchOffset emulates LIMIT page OFFSET o, as the seed's server ran it:
// page k re-runs the query with limit (k+1)·page and drops the first k·page
// rows, so the server reads, and here also sends, every earlier row again
// and the total work grows with the square of the rows.
func fetchOffset(ctx context.Context, c *client.Client, q *pb.Query, page int, ids []int64) ([]int64, error) {
	lq := proto.CloneOf(q)
	for offset := 0; ; offset += page {
		lq.Limit = uint64(offset + page)
		sc := c.Scan(ctx, lq, client.ScanOptions{Parallelism: 1, BatchSize: uint32(page)})
		seen := 0
		for sc.Next() {
			if seen >= offset {
				ids = appendID(ids, sc.Record())
			}
			seen++
		}
		if err := sc.Err(); err != nil {
			return ids, fmt.Errorf("offset %d: %w", offset, err)
		}
		if seen < offset+page {
			return ids, nil
		}
	}
}

func appendIDs(ids []int64, recs []*anypb.Any) []int64 {
	for _, r := range recs {
		ids = appendID(ids, r)
	}
	return ids
}

// appendID appends the id of a User record, read from field 1 with
// protowire (decoding the whole user would measure the client). A record
// without an id appends -1, which the id-set check reports.
func appendID(ids []int64, rec *anypb.Any) []int64 {
	b := rec.GetValue()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				break
			}
			return append(ids, int64(v))
		}
		if m := protowire.ConsumeFieldValue(num, typ, b); m >= 0 {
			b = b[m:]
		} else {
			break
		}
	}
	return append(ids, -1)
}

// checkIDs reports how got, the ids a method returned in order, differs
// from want, the matching ids in ascending order: missing, extra or
// repeated ids, or any other order than descending.
func checkIDs(want, got []int64) error {
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	var missing, extra, dup []int64
	i, j := 0, 0
	for i < len(want) || j < len(sorted) {
		switch {
		case j > 0 && j < len(sorted) && sorted[j] == sorted[j-1]:
			dup = append(dup, sorted[j])
			j++
		case j == len(sorted) || (i < len(want) && want[i] < sorted[j]):
			missing = append(missing, want[i])
			i++
		case i == len(want) || sorted[j] < want[i]:
			extra = append(extra, sorted[j])
			j++
		default:
			i++
			j++
		}
	}
	var errs []error
	for _, d := range []struct {
		what string
		ids  []int64
	}{{"missing", missing}, {"unexpected", extra}, {"repeated", dup}} {
		if len(d.ids) > 0 {
			errs = append(errs, fmt.Errorf("%d ids %s (first %v)", len(d.ids), d.what, d.ids[:min(3, len(d.ids))]))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d ids returned, %d expected: %w", len(got), len(want), errors.Join(errs...))
	}
	for k := 1; k < len(got); k++ {
		if got[k] >= got[k-1] {
			return fmt.Errorf("ids not in descending order at position %d: %d after %d", k, got[k], got[k-1])
		}
	}
	return nil
}

// wireCounter is a gRPC stats handler counting the message bytes a
// connection moves, both ways, as they go on the wire.
type wireCounter struct{ in, out atomic.Int64 }

var _ stats.Handler = (*wireCounter)(nil)

func (w *wireCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (w *wireCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (w *wireCounter) HandleConn(context.Context, stats.ConnStats)                       {}
func (w *wireCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch s := s.(type) {
	case *stats.InPayload:
		w.in.Add(int64(s.WireLength))
	case *stats.OutPayload:
		w.out.Add(int64(s.WireLength))
	}
}

func (w *wireCounter) total() int64 { return w.in.Load() + w.out.Load() }

// heapSampler records the peak of the process's Go heap while it runs.
// For an embedded server that is the server's memory plus the client's,
// which the lab keeps small (it keeps ids, not records).
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	peak uint64
}

const heapMetric = "/memory/classes/heap/objects:bytes"

// startHeapSampler collects garbage (so that runs start level) and
// samples the heap every millisecond until stopped.
func startHeapSampler() *heapSampler {
	runtime.GC()
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	s := []metrics.Sample{{Name: heapMetric}}
	go func() {
		defer close(h.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if s[0].Value.Kind() == metrics.KindUint64 {
				h.peak = max(h.peak, s[0].Value.Uint64())
			}
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

// Stop ends sampling and returns the peak in bytes.
func (h *heapSampler) Stop() uint64 {
	close(h.stop)
	<-h.done
	return h.peak
}

// served is what the server did for each method's fetches, by row label:
// its counters' growth over the method's runs, so that tests can hold
// them against the fetches made.
type served map[string]serverWork

// serverWork is the growth of a server's counters over some fetches.
type serverWork struct {
	fetches                         int
	queries, queryErrors, recordsRd uint64
}

// add records the server's work since before for label's fetches.
func (s served) add(ctx context.Context, t *bench.Target, label string, before *labv1.StatsResponse, fetches int) error {
	after, err := t.Stats(ctx)
	if err != nil {
		return err
	}
	s[label] = serverWork{fetches: fetches, queries: after.Queries - before.Queries,
		queryErrors: after.QueryErrors - before.QueryErrors, recordsRd: after.RecordsRead - before.RecordsRead}
	return nil
}

// errNotFinished marks an offset fetch cut by --offset-limit.
var errNotFinished = errors.New("not finished")

// fetchRuns collects what the measured runs of one method saw beyond
// rates (Measure calls a workload sequentially, so no lock is needed).
// Invariant: the slices have one entry per measured run, none for the
// warm-up.
type fetchRuns struct {
	// warmup is true until the warm-up run, if any, has been skipped.
	warmup bool
	// fetches counts the complete fetches, the warm-up's included.
	fetches int
	seconds []float64
	mb      []float64
	heapMB  []float64
}

// workload fetches every match once per call (d is ignored: one fetch is
// the unit of work) and checks the ids it got against want.
func (f *Experiment) workload(c *client.Client, wc *wireCounter, m fetchMethod, q *pb.Query, want []int64, embedded bool, runs *fetchRuns) bench.Workload {
	ids := make([]int64, 0, len(want))
	return func(ctx context.Context, _ time.Duration) (bench.Count, error) {
		if m.name == "offset" && f.OffsetLimit > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, f.OffsetLimit)
			defer cancel()
		}
		var heap *heapSampler
		if embedded {
			heap = startHeapSampler()
		}
		bytes0 := wc.total()
		start := time.Now()
		var err error
		ids, err = m.fetch(ctx, c, q, f.Page, ids[:0])
		elapsed := time.Since(start)
		var peak uint64
		if heap != nil {
			peak = heap.Stop()
		}
		if err != nil {
			// The limit's context ended the fetch. The error may be the
			// context's or a DEADLINE_EXCEEDED status from the server.
			if m.name == "offset" && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return bench.Count{}, fmt.Errorf("%w within %v (%d of %d rows)", errNotFinished, f.OffsetLimit, len(ids), len(want))
			}
			return bench.Count{}, err
		}
		if err := checkIDs(want, ids); err != nil {
			return bench.Count{}, fmt.Errorf("%s: %w", m.name, err)
		}
		moved := wc.total() - bytes0
		runs.fetches++
		if runs.warmup {
			runs.warmup = false
		} else {
			runs.seconds = append(runs.seconds, elapsed.Seconds())
			runs.mb = append(runs.mb, float64(moved)/1e6)
			runs.heapMB = append(runs.heapMB, float64(peak)/1e6)
		}
		return bench.Count{Ops: int64(len(ids)), Bytes: moved, Elapsed: elapsed}, nil
	}
}

// Run implements bench.Experiment.
func (f *Experiment) Run(ctx context.Context, env *bench.Env) (*bench.Result, error) {
	if err := f.defaults(env.Quick); err != nil {
		return nil, err
	}
	f.served = served{}
	res := &bench.Result{Chart: &bench.Chart{
		Title: "Fetch every match: pages vs streaming", Kind: bench.Bars,
		XLabel: "method", YLabel: "seconds", X: "method", Series: "data", Unit: "s", LogY: true,
	}}
	for _, n := range f.Users {
		rows, notes, err := f.runSize(ctx, env, n)
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, rows...)
		res.Notes = append(res.Notes, notes...)
	}
	res.Notes = append(res.Notes,
		fmt.Sprintf("%d rows per page and per Scan batch; MB counts message bytes on the wire both ways; offset re-reads and re-sends every earlier row", f.Page))
	return res, nil
}

// runSize loads n users into a fresh server and fetches the matches with
// every method.
func (f *Experiment) runSize(ctx context.Context, env *bench.Env, n int) ([]bench.Row, []string, error) {
	keyword := f.Keyword
	if keyword == "" {
		keyword = seedKeyword(n)
	}
	t, err := env.Target(ctx, bench.TargetConfig{NoSync: true})
	if err != nil {
		return nil, nil, err
	}
	if err := t.EnsureSchema(ctx, usersSchema); err != nil {
		return nil, nil, err
	}
	want, err := loadUsers(ctx, env.Progress, t, n, f.Seed, keyword)
	if err != nil {
		return nil, nil, err
	}
	if len(want) == 0 {
		return nil, nil, fmt.Errorf("no user name contains %q", keyword)
	}
	// A connection of its own, to count the bytes the fetches move.
	wc := new(wireCounter)
	c, err := client.Dial(t.Addr, t.ClientOptions(grpc.WithStatsHandler(wc))...)
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", t.Addr, err)
	}
	defer func() { _ = c.Close() }()

	notes := []string{fmt.Sprintf("users=%d: %d names contain %q (%.1f%%)", n, len(want), keyword, 100*float64(len(want))/float64(n))}
	if !t.Embedded {
		notes = append(notes, "--addr: peak server memory is unavailable (it is sampled in-process for the embedded server)")
	}
	var refs map[string]float64
	if keyword == seedKeyword(n) {
		refs = seed004[n]
	}
	q := fetchQuery(keyword)
	var rows []bench.Row
	for _, m := range fetchMethods {
		label := fmt.Sprintf("users=%d %s", n, m.name)
		runs := &fetchRuns{warmup: env.Warmup > 0}
		before, err := t.Stats(ctx)
		if err != nil {
			return nil, nil, err
		}
		s, err := env.Measure(ctx, label, f.workload(c, wc, m, q, want, t.Embedded, runs))
		if err == nil {
			err = f.served.add(ctx, t, label, before, runs.fetches)
		}
		if errors.Is(err, errNotFinished) {
			notes = append(notes, fmt.Sprintf("%s: %v", label, err))
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		params := map[string]any{"users": n, "data": fmt.Sprintf("%d users, %d rows", n, len(want)), "keyword": keyword, "method": m.name, "parallelism": m.parallelism, "rows": len(want)}
		var secRef, rateRef *bench.Reference
		if v, ok := refs[m.name]; ok {
			secRef = &bench.Reference{Value: v, Source: seed004Source}
			rateRef = &bench.Reference{Value: seed004Rows[n] / v, Source: seed004Source}
		}
		rows = append(rows,
			bench.NewRow(label, params, "s", runs.seconds, secRef),
			bench.NewRow(label, params, "rows/s", s.Ops, rateRef),
			bench.NewRow(label, params, "MB moved", runs.mb, nil))
		if t.Embedded {
			rows = append(rows, bench.NewRow(label, params, "MB peak heap", runs.heapMB, nil))
		}
	}
	return rows, notes, nil
}
