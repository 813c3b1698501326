package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/protobase/protobase/internal/cluster"
)

// watchEvery is how often the supervisor looks for processes that ended.
const watchEvery = 500 * time.Millisecond

// unit is one process of the cluster, an etcd member or a server, as the
// supervisor reports and restarts it.
type unit struct {
	name    string // what restart takes: m1, s1, ...
	what    string // "etcd member m1", "server s1 (127.0.0.1:7070)"
	log     string
	exited  func() (bool, error)
	restart func(context.Context) error
	// replace, for a member, puts a new member in its place (nil for a
	// server) and returns the unit that now stands there.
	replace func(context.Context) (*unit, error)
	down    bool // reported as ended and not restarted since
}

func units(c *cluster.Cluster) []*unit {
	var us []*unit
	for i, m := range c.Etcd.Members() {
		us = append(us, memberUnit(c, i, m))
	}
	for _, s := range c.Servers {
		us = append(us, &unit{
			name: s.Name, what: "server " + s.Name + " (" + s.Addr() + ")", log: s.Log,
			exited:  s.Exited,
			restart: s.Restart,
		})
	}
	return us
}

// memberUnit is the unit of member m, at place i of the cluster.
func memberUnit(c *cluster.Cluster, i int, m *cluster.Member) *unit {
	return &unit{
		name: m.Name, what: "etcd member " + m.Name + " (" + strings.TrimPrefix(m.ClientURL, "http://") + ")", log: m.Log,
		exited:  func() (bool, error) { return c.Etcd.Exited(i) },
		restart: func(ctx context.Context) error { return c.Etcd.Restart(ctx, i) },
		replace: func(ctx context.Context) (*unit, error) {
			nm, err := c.Etcd.Replace(ctx, i)
			if err != nil {
				return nil, err
			}
			return memberUnit(c, i, nm), nil
		},
	}
}

// restartHelp is what the supervisor prints when a process ends and when
// a command line is not understood.
const restartHelp = "type 'restart' and Enter to restart what has stopped, 'restart NAME' for one (m1, s1, ...), " +
	"'replace NAME' to replace a stopped member by a new one on a new directory, 'status' to list"

// supervise watches the cluster's processes until ctx is done: it reports
// each one that ends (with how it ended and where its log is) and
// restarts them on the commands read from in, one per line.
func supervise(ctx context.Context, c *cluster.Cluster, in io.Reader, out io.Writer, every time.Duration) {
	us := units(c)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case lines <- strings.TrimSpace(sc.Text()):
			case <-ctx.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			// Ctrl-C reaches the children too (one process group): what
			// stops after it is the shutdown, not a failure.
			if ctx.Err() == nil {
				reportExits(us, out)
			}
		case line := <-lines:
			reportExits(us, out) // a restart must know what is down
			command(ctx, us, line, out)
		}
	}
}

// reportExits prints one line for each process found ended since it was
// last seen running.
func reportExits(us []*unit, out io.Writer) {
	for _, u := range us {
		ended, err := u.exited()
		if !ended || u.down {
			continue
		}
		u.down = true
		how := "exited with status 0"
		if err != nil {
			how = err.Error()
		}
		fmt.Fprintf(out, "%s stopped: %s (log %s)\n%s\n", u.what, how, u.log, restartHelp)
	}
}

// command runs one line typed by the operator.
func command(ctx context.Context, us []*unit, line string, out io.Writer) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return
	}
	switch fields[0] {
	case "status":
		for _, u := range us {
			state := "running"
			if u.down {
				state = "stopped"
			}
			fmt.Fprintf(out, "%s: %s\n", u.what, state)
		}
	case "restart":
		restart(ctx, us, fields[1:], out)
	case "replace":
		replace(ctx, us, fields[1:], out)
	default:
		fmt.Fprintf(out, "unknown command %q: %s\n", fields[0], restartHelp)
	}
}

// restart starts again the named processes, or every stopped one when
// names is empty: members first, as the servers need a quorum.
func restart(ctx context.Context, us []*unit, names []string, out io.Writer) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	tried := false
	for _, u := range us {
		if len(names) > 0 && !want[u.name] {
			continue
		}
		delete(want, u.name)
		if !u.down {
			if len(names) > 0 {
				fmt.Fprintf(out, "%s is running\n", u.what)
			}
			continue
		}
		tried = true
		if err := u.restart(ctx); err != nil {
			fmt.Fprintf(out, "%s did not restart: %v\n", u.what, err)
			continue
		}
		u.down = false
		fmt.Fprintf(out, "%s restarted\n", u.what)
	}
	for n := range want {
		fmt.Fprintf(out, "no member or server named %q: %s\n", n, restartHelp)
	}
	if !tried && len(names) == 0 {
		fmt.Fprintln(out, "every member and server is running")
	}
}

// replace puts a new etcd member in the place of each named member, which
// must have stopped (etcd's MemberRemove and MemberAdd; see docs/scaling.md).
func replace(ctx context.Context, us []*unit, names []string, out io.Writer) {
	if len(names) == 0 {
		fmt.Fprintf(out, "replace what? %s\n", restartHelp)
	}
	for _, n := range names {
		i := slices.IndexFunc(us, func(u *unit) bool { return u.name == n && u.replace != nil })
		switch {
		case i < 0:
			fmt.Fprintf(out, "no member named %q: %s\n", n, restartHelp)
		case !us[i].down:
			fmt.Fprintf(out, "%s is running: only a stopped member is replaced\n", us[i].what)
		default:
			nu, err := us[i].replace(ctx)
			if err != nil {
				fmt.Fprintf(out, "%s was not replaced: %v\n", us[i].what, err)
				continue
			}
			fmt.Fprintf(out, "%s replaced by %s (log %s); give the servers the new --etcd-endpoints when they restart\n", us[i].what, nu.what, nu.log)
			us[i] = nu
		}
	}
}
