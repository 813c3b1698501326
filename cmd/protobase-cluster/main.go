// Command protobase-cluster runs a local Protobase cluster in the
// foreground, for development and trying out the etcd backend: three etcd
// members (protobase-etcd) and Protobase servers over them (protobase serve
// --store etcd), each its own process on loopback, through the harness in
// internal/cluster. `make cluster` builds the programs and runs it.
//
// It prints how to reach the cluster and runs until SIGINT or SIGTERM; the
// data stays in --dir, so the next run continues the same database. It
// reports a member or server that stops, and restarts it (or replaces a lost
// member by a new one) on a command typed on its standard input.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/protobase/protobase/internal/cluster"
)

// Exit codes: 0 after a signal, 1 when the cluster fails, 2 for a wrong
// command line.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// options are the command line's settings.
type options struct {
	dir        string
	bin        string
	servers    int
	etcdPorts  []int // client ports; each member's peer port is its client port + 1
	serverPort int   // the first server's port; the others follow it
	args       []string
	// maxTxnOps and maxRequestBytes are the members' transaction limits.
	maxTxnOps, maxRequestBytes uint
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitUsage
	}
	if err := serve(ctx, o, stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFailed
	}
	return exitOK
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("protobase-cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: protobase-cluster [flags] [-- serve flags...]

Runs three etcd members and --servers Protobase servers over them, each its
own process on 127.0.0.1, until SIGINT or SIGTERM. Data and logs stay in
--dir (remove it for a fresh cluster). A member or server that stops is
reported with its log; type 'restart' and Enter to start again what has
stopped, 'restart NAME' for one (m1, s1, ...), 'replace NAME' to replace a
stopped member by a new one on a new directory and ports (as when its
machine is lost), 'status' to list them. Flags after -- go to every
'protobase serve' (for example -- --lab, for protobase-bench --addr).

`)
		fs.PrintDefaults()
	}
	var ports string
	fs.StringVar(&o.dir, "dir", "./cluster-data", "directory of the members' and servers' data and logs")
	fs.StringVar(&o.bin, "bin", "./bin", "directory holding protobase and protobase-etcd (make cluster builds them there)")
	fs.IntVar(&o.servers, "servers", 2, "number of Protobase servers (1 to 9)")
	fs.StringVar(&ports, "etcd-ports", "2379,22379,32379", "the three members' client ports; each peer port is its client port + 1")
	fs.IntVar(&o.serverPort, "server-port", 7070, "the first server's gRPC port; the others follow it")
	// A write batch is one transaction: a record and each of its index
	// entries is an operation, so etcd's defaults (128, 1.5 MiB) would
	// refuse batches of more than a few dozen records.
	fs.UintVar(&o.maxTxnOps, "max-txn-ops", 65536, "the members' --max-txn-ops: most operations in one transaction (etcd's default: 128)")
	fs.UintVar(&o.maxRequestBytes, "max-request-bytes", 64<<20, "the members' --max-request-bytes (etcd's default: 1.5 MiB)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.args = fs.Args()
	if o.maxTxnOps < 1 || o.maxRequestBytes < 1 {
		return o, errors.New("--max-txn-ops and --max-request-bytes must be at least 1")
	}
	if o.servers < 1 || o.servers > 9 {
		return o, fmt.Errorf("--servers %d: want 1 to 9", o.servers)
	}
	if o.serverPort < 1 || o.serverPort+o.servers-1 > 65535 {
		return o, fmt.Errorf("--server-port %d: want a port from 1 that leaves room for %d servers", o.serverPort, o.servers)
	}
	for _, f := range strings.Split(ports, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 1 || p > 65534 {
			return o, fmt.Errorf("--etcd-ports %q: want three ports from 1 to 65534", ports)
		}
		o.etcdPorts = append(o.etcdPorts, p)
	}
	if len(o.etcdPorts) != 3 {
		return o, fmt.Errorf("--etcd-ports %q: want three ports", ports)
	}
	seen := map[int]bool{}
	for _, p := range append(append([]int(nil), o.etcdPorts...), peerPorts(o.etcdPorts)...) {
		if seen[p] || (p >= o.serverPort && p < o.serverPort+o.servers) {
			return o, fmt.Errorf("port %d is used twice (--etcd-ports take PORT and PORT+1; servers take --server-port onward)", p)
		}
		seen[p] = true
	}
	return o, nil
}

func peerPorts(client []int) []int {
	peer := make([]int, len(client))
	for i, p := range client {
		peer[i] = p + 1
	}
	return peer
}

func serve(ctx context.Context, o options, stdin io.Reader, stdout io.Writer) error {
	bins := cluster.Binaries{Etcd: filepath.Join(o.bin, "protobase-etcd"), Protobase: filepath.Join(o.bin, "protobase")}
	for _, b := range []string{bins.Etcd, bins.Protobase} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%w (run make cluster, or go build -o %s ./cmd/%s)", err, b, filepath.Base(b))
		}
	}
	addrs := make([]string, o.servers)
	for i := range addrs {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(o.serverPort+i)
	}
	startCtx, cancel := context.WithTimeout(ctx, 3*cluster.StartTimeout)
	defer cancel()
	c, err := cluster.Start(startCtx, bins, o.dir, cluster.Options{
		Etcd: cluster.EtcdOptions{ClientPorts: o.etcdPorts, PeerPorts: peerPorts(o.etcdPorts), Args: []string{
			"--max-txn-ops", strconv.FormatUint(uint64(o.maxTxnOps), 10),
			"--max-request-bytes", strconv.FormatUint(uint64(o.maxRequestBytes), 10)}},
		Servers:     o.servers,
		Server:      cluster.ServerOptions{Args: o.args},
		ServerAddrs: addrs,
	})
	if err != nil {
		return err
	}
	printCluster(stdout, c, o.dir, bins.Protobase)
	supervise(ctx, c, stdin, stdout, watchEvery)
	fmt.Fprintln(stdout, "stopping the servers, then the members")
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop() }()
	select {
	case err := <-stopped:
		return err
	case <-time.After(time.Minute):
		return errors.New("the cluster did not stop within a minute")
	}
}

func printCluster(w io.Writer, c *cluster.Cluster, dir, pb string) {
	eps := strings.Join(c.Etcd.Endpoints(), ",")
	fmt.Fprintf(w, "etcd members:      %s (data and logs in %s)\n", eps, filepath.Join(dir, "etcd"))
	for _, s := range c.Servers {
		fmt.Fprintf(w, "protobase server:  %s (log %s)\n", s.Addr(), s.Log)
	}
	a := c.Servers[0].Addr()
	b := c.Servers[len(c.Servers)-1].Addr()
	fmt.Fprintf(w, `
Every server serves the same database. Try:
  %[1]s --addr %[2]s schema apply shop.proto
  %[1]s --addr %[2]s insert --type shop.User users.jsonl
  %[1]s --addr %[3]s search --type shop.User --where 'id >= 1'
Another server on the same cluster:
  %[1]s serve --store etcd --etcd-endpoints %[4]s --data DIR --grpc-addr 127.0.0.1:PORT
A member or server that stops is reported here; type 'restart' and Enter
to start it again ('restart NAME' for one, 'replace NAME' for a new member
in a lost one's place, 'status' to list them).
Ctrl-C stops everything; the data stays in %[5]s.
`, pb, a, b, eps, dir)
}
