package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/protobase/protobase/internal/freeport"
)

// Replace puts a new member in the place of member i, which must have
// stopped (Kill, or a machine lost for good), as an operator replaces a
// machine: through the running members it removes i from the cluster
// (etcd's MemberRemove) and adds a member with a new name, data directory
// and ports (MemberAdd), then starts that one with
// --initial-cluster-state existing, and it copies the data from the
// leader. It returns the new member, which Members and Endpoints list at
// i from then on.
//
// The order matters: with the lost member removed first, the cluster of
// three goes to two of two and back to three, and never counts a member
// that is not there yet toward its quorum (adding first would make it
// four, with a quorum of three, of which only two run until the new one
// has caught up).
func (c *Etcd) Replace(ctx context.Context, i int) (*Member, error) {
	c.mu.Lock()
	old, named := c.members[i], c.named
	p := old.proc
	var others []string
	for j, m := range c.members {
		if j != i {
			others = append(others, m.ClientURL)
		}
	}
	c.mu.Unlock()
	if p != nil && !p.exited() {
		return nil, fmt.Errorf("etcd member %s is still running: kill it before replacing it", old.Name)
	}
	ports, err := freeport.Loopback(2)
	if err != nil {
		return nil, err
	}
	m := &Member{
		Name:      "m" + strconv.Itoa(named+1),
		ClientURL: "http://127.0.0.1:" + strconv.Itoa(ports[0]),
		PeerURL:   "http://127.0.0.1:" + strconv.Itoa(ports[1]),
	}
	m.Dir = filepath.Join(c.dir, m.Name)
	m.Log = m.Dir + ".log"
	initial, err := swapMember(ctx, others, old, m)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.named++
	c.members[i] = m
	c.initial = initial
	c.mu.Unlock()
	return m, c.run(ctx, m, initial, "existing")
}

// swapMember removes old from the cluster and adds m, through a client of
// the members at endpoints, and returns the --initial-cluster value of
// the membership that leaves.
func swapMember(ctx context.Context, endpoints []string, old, m *Member) (string, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return "", fmt.Errorf("replace etcd member %s: %w", old.Name, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	list, err := cli.MemberList(ctx)
	if err != nil {
		return "", fmt.Errorf("replace etcd member %s: list members: %w", old.Name, err)
	}
	for _, mem := range list.Members {
		if len(mem.PeerURLs) > 0 && mem.PeerURLs[0] == old.PeerURL {
			if _, err := cli.MemberRemove(ctx, mem.ID); err != nil {
				return "", fmt.Errorf("replace etcd member %s: remove it: %w", old.Name, err)
			}
		}
	}
	added, err := addMember(ctx, cli, m.PeerURL)
	if err != nil {
		return "", fmt.Errorf("replace etcd member %s: add %s: %w", old.Name, m.Name, err)
	}
	var initial []string
	for _, mem := range added.Members {
		name := mem.Name
		if mem.ID == added.Member.ID {
			name = m.Name // not started yet, so still unnamed
		}
		for _, u := range mem.PeerURLs {
			initial = append(initial, name+"="+u)
		}
	}
	return strings.Join(initial, ","), nil
}

// addMember adds a member of peerURL, waiting out etcd's refusal of an
// "unhealthy cluster": the leader adds a member only once it has been
// connected to every other member for 5 s (etcd's strict reconfiguration
// check), which a cluster just started, or just changed, is not yet.
func addMember(ctx context.Context, cli *clientv3.Client, peerURL string) (*clientv3.MemberAddResponse, error) {
	for {
		added, err := cli.MemberAdd(ctx, []string{peerURL})
		if !errors.Is(err, rpctypes.ErrUnhealthy) {
			return added, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
