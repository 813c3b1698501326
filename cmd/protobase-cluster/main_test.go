package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.servers != 2 || len(o.etcdPorts) != 3 || o.serverPort != 7070 {
		t.Fatalf("defaults %+v", o)
	}
	o, err = parseFlags([]string{"--servers", "1", "--", "--lab", "--log-level", "debug"}, &bytes.Buffer{})
	if err != nil || strings.Join(o.args, " ") != "--lab --log-level debug" {
		t.Fatalf("pass-through flags %q, %v", o.args, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--servers", "0"}, "want 1 to 9"},
		{[]string{"--servers", "10"}, "want 1 to 9"},
		{[]string{"--servers", "x"}, "invalid value"},
		{[]string{"--server-port", "0"}, "--server-port 0"},
		{[]string{"--server-port", "65535"}, "--server-port 65535"},
		{[]string{"--etcd-ports", "2379,22379"}, "want three ports"},
		{[]string{"--etcd-ports", "2379,22379,32379,42379"}, "want three ports"},
		{[]string{"--etcd-ports", "2379,,32379"}, "--etcd-ports"},
		{[]string{"--etcd-ports", "2379,x,32379"}, "--etcd-ports"},
		{[]string{"--etcd-ports", "2379,-1,32379"}, "--etcd-ports"},
		{[]string{"--etcd-ports", "2379,65535,32379"}, "--etcd-ports"},
		{[]string{"--etcd-ports", "2379,2380,32379"}, "port 2380 is used twice"},
		{[]string{"--etcd-ports", "2379,2379,32379"}, "used twice"},
		{[]string{"--etcd-ports", "7070,22379,32379"}, "port 7070 is used twice"},
		{[]string{"--max-txn-ops", "0"}, "at least 1"},
		{[]string{"--max-request-bytes", "-1"}, "invalid value"},
		{[]string{"stray"}, ""}, // positional words go to serve; serve refuses them
	} {
		_, err := parseFlags(tc.args, &bytes.Buffer{})
		if tc.want == "" {
			if err != nil {
				t.Errorf("parseFlags(%q) = %v", tc.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestRunWithoutBinaries(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--bin", t.TempDir(), "--dir", t.TempDir()}, strings.NewReader(""), &out, &errOut)
	if code != exitFailed || !strings.Contains(errOut.String(), "make cluster") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// make cluster builds bin/protobase with the version stamp that make build
// gives it, not over it without one.
func TestMakeClusterStampsVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	cmd := exec.Command("make", "-n", "cluster", "VERSION=v9.9.9-test")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n cluster: %v\n%s", err, out)
	}
	builds := 0
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "go build") || !strings.HasSuffix(strings.TrimSpace(line), "./cmd/protobase") {
			continue
		}
		builds++
		if !strings.Contains(line, "-X main.version=v9.9.9-test") {
			t.Errorf("make cluster builds bin/protobase without the version stamp: %s", line)
		}
	}
	if builds == 0 {
		t.Fatalf("make -n cluster builds no bin/protobase:\n%s", out)
	}
}
