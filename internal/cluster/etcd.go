package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/protobase/protobase/internal/freeport"
)

// EtcdOptions shape an etcd cluster.
type EtcdOptions struct {
	// Members is the number of members (0: 3).
	Members int
	// ClientPorts and PeerPorts fix each member's loopback ports; when nil,
	// free ports are picked.
	ClientPorts, PeerPorts []int
	// Args are extra flags for every member (e.g. --max-txn-ops 512).
	Args []string
}

// Etcd is a running etcd cluster of member processes.
//
// Its methods may be called from several goroutines: mu guards the
// members, which Replace replaces, and their processes, which Kill and
// Restart replace.
type Etcd struct {
	bin  string
	dir  string // holds the members' data directories and logs
	args []string

	mu sync.Mutex
	// initial is the --initial-cluster value, NAME=PEERURL,...: the first
	// members, then the membership as Replace leaves it.
	initial string
	members []*Member
	named   int // members named so far: the next one is m<named+1>
}

// Member is one etcd member. Its fields do not change after the start.
type Member struct {
	Name      string
	Dir       string // its data directory
	ClientURL string // http://127.0.0.1:PORT
	PeerURL   string
	Log       string // the file holding its output

	proc *process // guarded by Etcd.mu
}

// StartEtcd starts a new cluster of opt.Members members of bin under dir
// (one subdirectory each) and returns once every member serves.
func StartEtcd(ctx context.Context, bin, dir string, opt EtcdOptions) (*Etcd, error) {
	n := opt.Members
	if n == 0 {
		n = 3
	}
	clientPorts, peerPorts := opt.ClientPorts, opt.PeerPorts
	if clientPorts == nil || peerPorts == nil {
		ports, err := freeport.Loopback(2 * n)
		if err != nil {
			return nil, err
		}
		clientPorts, peerPorts = ports[:n], ports[n:]
	}
	if len(clientPorts) != n || len(peerPorts) != n {
		return nil, fmt.Errorf("etcd cluster: %d members but %d client and %d peer ports", n, len(clientPorts), len(peerPorts))
	}
	c := &Etcd{bin: bin, dir: dir, args: opt.Args, members: make([]*Member, n), named: n}
	initial := make([]string, n)
	for i := range n {
		m := &Member{
			Name:      "m" + strconv.Itoa(i+1),
			ClientURL: "http://127.0.0.1:" + strconv.Itoa(clientPorts[i]),
			PeerURL:   "http://127.0.0.1:" + strconv.Itoa(peerPorts[i]),
		}
		m.Dir = filepath.Join(dir, m.Name)
		m.Log = m.Dir + ".log"
		c.members[i] = m
		initial[i] = m.Name + "=" + m.PeerURL
	}
	c.initial = strings.Join(initial, ",")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("etcd cluster: %w", err)
	}
	// A member of a new cluster is ready only once a quorum runs: start
	// them all at once.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = c.startMember(ctx, i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// startMember starts member i on its directory: a new member if the
// directory is empty, else the member its data says it is.
func (c *Etcd) startMember(ctx context.Context, i int) error {
	c.mu.Lock()
	m, initial := c.members[i], c.initial
	c.mu.Unlock()
	return c.run(ctx, m, initial, "new")
}

// run starts m's process, with --initial-cluster initial and
// --initial-cluster-state state (which etcd reads only on an empty data
// directory).
func (c *Etcd) run(ctx context.Context, m *Member, initial, state string) error {
	args := append([]string{
		"--name", m.Name, "--data-dir", m.Dir,
		"--listen-client-urls", m.ClientURL, "--listen-peer-urls", m.PeerURL,
		"--initial-cluster", initial, "--initial-cluster-state", state, "--log-level", "error",
	}, c.args...)
	p, _, err := start(ctx, "etcd member "+m.Name, c.bin, args, m.Log, prefixed("READY "))
	if err != nil {
		return err
	}
	c.mu.Lock()
	m.proc = p
	c.mu.Unlock()
	return nil
}

// Members are the cluster's members, in order (a member Replace put in
// takes the place of the one it replaced).
func (c *Etcd) Members() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.members)
}

// Endpoints are the members' client addresses, host:port, in order.
func (c *Etcd) Endpoints() []string {
	ms := c.Members()
	eps := make([]string, len(ms))
	for i, m := range ms {
		eps[i] = strings.TrimPrefix(m.ClientURL, "http://")
	}
	return eps
}

// Kill kills member i with SIGKILL, as a machine failure would, and waits
// until it is gone.
func (c *Etcd) Kill(i int) error {
	c.mu.Lock()
	m := c.members[i]
	p := m.proc
	c.mu.Unlock()
	if p == nil || p.exited() {
		return fmt.Errorf("etcd member %s is not running", m.Name)
	}
	p.kill()
	return nil
}

// Pause stops member i with SIGSTOP, as a machine that hangs: its
// connections stay open and nothing on them is answered until Resume.
func (c *Etcd) Pause(i int) error {
	p, err := c.running(i)
	if err != nil {
		return err
	}
	return p.pause()
}

// Resume lets member i, paused by Pause, go on (SIGCONT).
func (c *Etcd) Resume(i int) error {
	p, err := c.running(i)
	if err != nil {
		return err
	}
	return p.resume()
}

// running returns member i's process, or an error when it has none.
func (c *Etcd) running(i int) (*process, error) {
	c.mu.Lock()
	m := c.members[i]
	p := m.proc
	c.mu.Unlock()
	if p == nil || p.exited() {
		return nil, fmt.Errorf("etcd member %s is not running", m.Name)
	}
	return p, nil
}

// Exited reports whether member i's process has ended (by Kill, Stop, or
// of itself) and, if so, how it ended: nil for exit status 0.
func (c *Etcd) Exited(i int) (bool, error) {
	c.mu.Lock()
	p := c.members[i].proc
	c.mu.Unlock()
	if p == nil {
		return true, nil
	}
	return p.exitStatus()
}

// Restart starts member i again on its data directory after Kill (it
// rejoins with the state it had and catches up from the leader).
func (c *Etcd) Restart(ctx context.Context, i int) error {
	c.mu.Lock()
	m := c.members[i]
	p := m.proc
	c.mu.Unlock()
	if p != nil && !p.exited() {
		return fmt.Errorf("etcd member %s is still running", m.Name)
	}
	return c.startMember(ctx, i)
}

// Stop stops every running member (SIGTERM, then SIGKILL past a bound).
func (c *Etcd) Stop() error {
	c.mu.Lock()
	ps := make([]*process, len(c.members))
	for i, m := range c.members {
		ps[i] = m.proc
	}
	c.mu.Unlock()
	return stopAll(ps)
}

// KillAll kills every running member with SIGKILL: the quick end of a test
// whose data is thrown away (a graceful Stop spends seconds handing over
// leadership between members that are all going).
func (c *Etcd) KillAll() {
	c.mu.Lock()
	ps := make([]*process, 0, len(c.members))
	for _, m := range c.members {
		if m.proc != nil {
			ps = append(ps, m.proc)
		}
	}
	c.mu.Unlock()
	for _, p := range ps {
		if !p.exited() {
			p.kill()
		}
	}
}
