package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// ServerOptions shape one Protobase server of a cluster.
type ServerOptions struct {
	// Addr is its gRPC listen address (empty: a free loopback port, a new
	// one at each restart).
	Addr string
	// Prefix is its --etcd-prefix (empty: the server's default). Servers of
	// one database share it.
	Prefix string
	// Args are extra flags for serve (e.g. --lab, --log-level debug).
	Args []string
}

// Server is one `protobase serve --store etcd` process.
//
// mu guards proc and addr, which Kill and Restart change; the other fields
// do not change after the start.
type Server struct {
	Name string
	Dir  string // its --data directory (local files only: the records are in etcd)
	Log  string // the file holding its output

	bin  string
	args []string

	mu   sync.Mutex
	proc *process
	addr string
}

// servingPrefix begins the line `protobase serve` prints once it serves.
const servingPrefix = "protobase serving on "

// serving recognises the line `protobase serve` prints once it serves, as
// text or (with --log-format json) as a JSON object, and returns its
// address.
func serving(line string) (string, bool) {
	if rest, ok := prefixed(servingPrefix)(line); ok {
		addr, _, _ := strings.Cut(rest, " ") // "ADDR (data DIR)"
		return addr, true
	}
	var banner struct{ Msg, Addr string }
	if json.Unmarshal([]byte(line), &banner) == nil && banner.Msg == "protobase serving" && banner.Addr != "" {
		return banner.Addr, true
	}
	return "", false
}

// StartServer starts a Protobase server of bin named name, over the etcd
// cluster at endpoints, with its local directory under dir, and returns once
// it answers health checks.
func StartServer(ctx context.Context, bin, dir, name string, endpoints []string, opt ServerOptions) (*Server, error) {
	s := &Server{Name: name, Dir: filepath.Join(dir, name), bin: bin}
	s.Log = s.Dir + ".log"
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("server %s: %w", name, err)
	}
	addr := opt.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s.args = []string{"serve", "--store", "etcd", "--etcd-endpoints", strings.Join(endpoints, ","),
		"--data", s.Dir, "--grpc-addr", addr}
	if opt.Prefix != "" {
		s.args = append(s.args, "--etcd-prefix", opt.Prefix)
	}
	s.args = append(s.args, opt.Args...)
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	p, addr, err := start(ctx, "server "+s.Name, s.bin, s.args, s.Log, serving)
	if err != nil {
		return err
	}
	if err := waitHealthy(ctx, addr); err != nil {
		p.kill()
		return fmt.Errorf("server %s on %s: %w%s", s.Name, addr, err, p.logTail())
	}
	s.mu.Lock()
	s.proc, s.addr = p, addr
	s.mu.Unlock()
	return nil
}

// waitHealthy polls the gRPC health service until it reports SERVING, for at
// most StartTimeout.
func waitHealthy(ctx context.Context, addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	hc := healthpb.NewHealthClient(conn)
	for {
		// WaitForReady turns the poll into a wait for the connection.
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("not healthy within %s (last: %v %w)", StartTimeout, resp.GetStatus(), err)
		}
		// A server that answers NOT_SERVING is still starting: ask again
		// shortly rather than in a tight loop.
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// Addr is the server's gRPC address (it changes at a restart when the
// server was started on port 0).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Kill kills the server with SIGKILL and waits until it is gone.
func (s *Server) Kill() error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil || p.exited() {
		return fmt.Errorf("server %s is not running", s.Name)
	}
	p.kill()
	return nil
}

// Pause stops the server with SIGSTOP, as a machine that hangs: its
// connections stay open and nothing on them is answered, and it no longer
// keeps its etcd leases alive, so the locks it holds lapse. Kill ends it.
func (s *Server) Pause() error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil || p.exited() {
		return fmt.Errorf("server %s is not running", s.Name)
	}
	return p.pause()
}

// Exited reports whether the server's process has ended (by Kill, Stop, or
// of itself) and, if so, how it ended: nil for exit status 0.
func (s *Server) Exited() (bool, error) {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return true, nil
	}
	return p.exitStatus()
}

// Restart starts the server again after Kill or Stop, with the same flags.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p != nil && !p.exited() {
		return fmt.Errorf("server %s is still running", s.Name)
	}
	return s.start(ctx)
}

// Stop stops the server with SIGTERM (in-flight calls finish), then SIGKILL
// past a bound.
func (s *Server) Stop() error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil || p.exited() {
		return nil
	}
	return p.stop()
}

// Options shape a whole cluster: etcd members and Protobase servers.
type Options struct {
	Etcd EtcdOptions
	// Servers is the number of Protobase servers (0: none).
	Servers int
	// Server shapes every server; ServerAddrs, when set, fixes each one's
	// address (overriding Server.Addr).
	Server      ServerOptions
	ServerAddrs []string
}

// Cluster is an etcd cluster and the Protobase servers over it. Servers
// grows with AddServer, which is not safe to call concurrently.
type Cluster struct {
	Etcd    *Etcd
	Servers []*Server

	bins Binaries
	dir  string
}

// Start starts the members, then the servers, under dir; it stops what it
// started if any part fails.
func Start(ctx context.Context, bins Binaries, dir string, opt Options) (*Cluster, error) {
	e, err := StartEtcd(ctx, bins.Etcd, filepath.Join(dir, "etcd"), opt.Etcd)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Etcd: e, bins: bins, dir: dir}
	if opt.ServerAddrs != nil && len(opt.ServerAddrs) != opt.Servers {
		_ = c.Stop()
		return nil, fmt.Errorf("cluster: %d servers but %d addresses", opt.Servers, len(opt.ServerAddrs))
	}
	for i := range opt.Servers {
		so := opt.Server
		if opt.ServerAddrs != nil {
			so.Addr = opt.ServerAddrs[i]
		}
		if _, err := c.AddServer(ctx, so); err != nil {
			_ = c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// AddServer starts one more server over the cluster, named after its
// place (s1, s2, ...), and appends it to Servers.
func (c *Cluster) AddServer(ctx context.Context, opt ServerOptions) (*Server, error) {
	name := fmt.Sprintf("s%d", len(c.Servers)+1)
	s, err := StartServer(ctx, c.bins.Protobase, filepath.Join(c.dir, "servers"), name, c.Etcd.Endpoints(), opt)
	if err != nil {
		return nil, err
	}
	c.Servers = append(c.Servers, s)
	return s, nil
}

// Stop stops the servers, then the members.
func (c *Cluster) Stop() error {
	var errs []error
	for _, s := range c.Servers {
		errs = append(errs, s.Stop())
	}
	errs = append(errs, c.Etcd.Stop())
	return errors.Join(errs...)
}
