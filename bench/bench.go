package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/server"
)

// Experiment is one lab experiment. An Experiment value is used for one
// invocation: Flags binds flags into its fields, then Run is called once.
type Experiment interface {
	// Name is the experiment's command name (lower case, no spaces).
	Name() string
	// Describe is a one-line description for help texts and reports.
	Describe() string
	// Flags registers the experiment's own flags (may register none).
	Flags(fs *pflag.FlagSet)
	// Run runs the experiment against env and returns its rows.
	Run(ctx context.Context, env *Env) (*Result, error)
}

// Options are the knobs every experiment shares.
type Options struct {
	// Runs is the number of measured repetitions of each configuration (≥1).
	Runs int
	// Duration is the length of one measured run.
	Duration time.Duration
	// DurationSet reports that Duration was given explicitly rather than
	// left at its default, so that an experiment whose seed fixed the
	// length of a run (transports: wrk's 10 s) can use that length instead.
	DurationSet bool
	// Warmup is the length of the unmeasured run before the measured ones
	// (0: none).
	Warmup time.Duration
	// Quick asks experiments for fewer configurations and smaller data so
	// that all of them together finish in under a minute.
	Quick bool
	// Addr, when set, targets a running server (started with --lab) instead
	// of an embedded one.
	Addr string
	// ClientOptions are added to the gRPC connections to Addr (TLS:
	// --tls-ca; the API key: --api-key).
	ClientOptions []client.Option
	// APIKey and TLS are what experiments that reach Addr's server other
	// than through a client (the transports experiment's REST and NATS
	// hops) send and trust: the key as "Authorization: Bearer KEY" (and
	// the NATS login), TLS as the client configuration (nil: plaintext).
	APIKey string
	TLS    *tls.Config
	// Etcd, when it names endpoints, also runs the embedded servers of the
	// experiments that compare storage backends (ingest, batching) on that
	// etcd cluster, each under a fresh prefix below Etcd.Prefix (empty:
	// EtcdBenchPrefix) that is dropped when the server stops.
	Etcd server.EtcdConfig
}

// EtcdBenchPrefix is where the lab's etcd stores live unless
// Options.Etcd.Prefix says otherwise: one fresh prefix below it per
// embedded server.
const EtcdBenchPrefix = "/protobase-bench/"

// Defaults for Options; QuickOptions are those of --quick.
const (
	DefaultRuns     = 5
	DefaultDuration = 2 * time.Second
	DefaultWarmup   = 1 * time.Second
	QuickRuns       = 2
	QuickDuration   = 150 * time.Millisecond
	QuickWarmup     = 50 * time.Millisecond
)

// DefaultOptions returns the options of a full run.
func DefaultOptions() Options {
	return Options{Runs: DefaultRuns, Duration: DefaultDuration, Warmup: DefaultWarmup}
}

// QuickOptions returns the options of --quick.
func QuickOptions() Options {
	return Options{Runs: QuickRuns, Duration: QuickDuration, Warmup: QuickWarmup, Quick: true}
}

// Validate reports the first option out of range.
func (o Options) Validate() error {
	switch {
	case o.Runs < 1:
		return fmt.Errorf("runs must be at least 1, got %d", o.Runs)
	case o.Runs > 1000:
		return fmt.Errorf("runs must be at most 1000, got %d", o.Runs)
	case o.Duration < time.Millisecond:
		return fmt.Errorf("duration must be at least 1ms, got %v", o.Duration)
	case o.Duration > time.Hour:
		return fmt.Errorf("duration must be at most 1h, got %v", o.Duration)
	case o.Warmup < 0:
		return fmt.Errorf("warmup must not be negative, got %v", o.Warmup)
	}
	return nil
}

// Env is what an experiment runs in: the shared options, progress
// reporting, and the servers it starts. Experiments get one from Run and
// must not keep it after Run returns.
type Env struct {
	Options
	// Progress shows what is running; never nil inside Run.
	Progress Progress

	mu      sync.Mutex // guards targets
	targets []*Target  // started by Target, closed by Close
}

// NewEnv returns an Env with opts; progress may be nil (nothing is shown).
func NewEnv(opts Options, progress Progress) *Env {
	if progress == nil {
		progress = NoProgress{}
	}
	return &Env{Options: opts, Progress: progress}
}

// Close stops every server the Env started. Run calls it after each
// experiment.
func (e *Env) Close() error {
	e.mu.Lock()
	ts := e.targets
	e.targets = nil
	e.mu.Unlock()
	var errs []error
	for _, t := range ts {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}

// Result is what one experiment measured.
type Result struct {
	Experiment string    `json:"experiment"`
	Machine    Machine   `json:"machine"`
	Started    time.Time `json:"started"`
	// Notes say what the reader must know to read the rows (for example,
	// that --addr ran only the server's own sync mode).
	Notes []string `json:"notes,omitempty"`
	Rows  []Row    `json:"rows"`
	// Chart says how to draw Rows; nil for no chart.
	Chart *Chart `json:"-"`
}

// Row is one configuration's measurement: the median of Runs repetitions
// and their spread. Invariant: Min ≤ Median ≤ Max.
type Row struct {
	Name string `json:"name"`
	// Params are the configuration's parameters (for example batch=100);
	// values are strings, integers or booleans.
	Params map[string]any `json:"params"`
	Unit   string         `json:"unit"`
	Median float64        `json:"median"`
	Min    float64        `json:"min"`
	Max    float64        `json:"max"`
	Runs   int            `json:"runs"`
	// Reference is the published figure for this configuration, or nil.
	Reference *Reference `json:"reference"`
}

// Ratio returns Median / Reference.Value, or 0 without a reference.
func (r Row) Ratio() float64 {
	if r.Reference == nil || r.Reference.Value == 0 {
		return 0
	}
	return r.Median / r.Reference.Value
}

// Reference is a published figure and where it was published.
type Reference struct {
	Value  float64 `json:"value"`
	Source string  `json:"source"`
}

// Machine describes where the experiment ran.
type Machine struct {
	CPUs  int    `json:"cpus"`
	Model string `json:"model"`
	Go    string `json:"go"`
	OS    string `json:"os"`
}

// ChartKind is how a chart draws its rows.
type ChartKind int

const (
	// Bars draws grouped bars: one group per X value, one bar per series.
	Bars ChartKind = iota
	// Lines draws one line per series over a numeric X.
	Lines
)

// Chart describes an experiment's chart; Draw renders it from the rows.
type Chart struct {
	Title  string
	Kind   ChartKind
	XLabel string
	YLabel string
	// X names the param giving a row's position (category for Bars, a
	// number for Lines); Series the param splitting rows into series
	// ("" for one series).
	X      string
	Series string
	// Unit selects the rows drawn ("" for all).
	Unit string
	// Better says which way is better ("higher is better", "lower is
	// better"); "" lets the unit decide (see Chart.better), "-" says
	// neither.
	Better string
	// LogX and LogY ask for log scales; Draw also picks a log Y on its own
	// when the values span more than two decades.
	LogX, LogY bool
}

// CurrentMachine describes this machine.
func CurrentMachine() Machine {
	return Machine{
		CPUs:  runtime.NumCPU(),
		Model: cpuModel(),
		Go:    runtime.Version(),
		OS:    runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// cpuModel reads the CPU model name where the OS tells it (Linux), or
// returns "unknown".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

var (
	registryMu sync.Mutex // guards registry
	registry   []func() Experiment
)

// Register adds an experiment constructor; call it from an init function
// of the experiment's package (see the package comment).
// It panics on a duplicate name, which is a programming error.
func Register(newExperiment func() Experiment) {
	registryMu.Lock()
	defer registryMu.Unlock()
	name := newExperiment().Name()
	for _, f := range registry {
		if f().Name() == name {
			panic("bench: experiment " + name + " registered twice")
		}
	}
	registry = append(registry, newExperiment)
}

// Experiments returns a fresh instance of every registered experiment,
// sorted by name (registration order follows package initialization,
// which is not the place to decide what a user sees first).
func Experiments() []Experiment {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Experiment, len(registry))
	for i, f := range registry {
		out[i] = f()
	}
	slices.SortFunc(out, func(a, b Experiment) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}

// Lookup returns a fresh instance of the named experiment.
func Lookup(name string) (Experiment, error) {
	var names []string
	for _, e := range Experiments() {
		if e.Name() == name {
			return e, nil
		}
		names = append(names, e.Name())
	}
	return nil, fmt.Errorf("unknown experiment %q (have: %s)", name, strings.Join(names, ", "))
}

// CheckBatches validates a --batches list: every value in 1..100000.
func CheckBatches(bs []int) error {
	for _, n := range bs {
		if n < 1 || n > 100000 {
			return fmt.Errorf("--batches: %d is out of range 1..100000", n)
		}
	}
	return nil
}
