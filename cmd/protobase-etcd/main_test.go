package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	dir := t.TempDir()
	good := []string{"--name", "m1", "--data-dir", dir,
		"--listen-client-urls", "http://127.0.0.1:2379", "--listen-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "m1=http://127.0.0.1:2380"}
	cfg, err := parseFlags(good, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "m1" || cfg.AdvertiseClientUrls[0].Host != "127.0.0.1:2379" || cfg.MaxTxnOps != 128 {
		t.Fatalf("config %+v", cfg)
	}
	with := func(flag, value string) []string {
		args := append([]string(nil), good...)
		for i := 0; i < len(args); i += 2 {
			if args[i] == flag {
				args[i+1] = value
				return args
			}
		}
		return append(args, flag, value)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--name is required"},
		{with("--name", " "), "--name is required"},
		{with("--data-dir", ""), "--data-dir is required"},
		{with("--listen-client-urls", "127.0.0.1:2379"), "--listen-client-urls"},
		{with("--listen-client-urls", "https://127.0.0.1:2379"), "want one URL"},
		{with("--listen-client-urls", "http://127.0.0.1"), "want one URL"},
		{with("--listen-client-urls", "http://u:p@127.0.0.1:2379"), "want one URL"},
		{with("--listen-client-urls", "http://127.0.0.1:2379,http://127.0.0.1:2381"), "2379,http"},
		{with("--listen-peer-urls", "http://127.0.0.1:2380/path"), "want one URL"},
		{with("--listen-peer-urls", "http://[::1"), "--listen-peer-urls"},
		{with("--listen-peer-urls", "http://127.0.0.1:2380?x=1"), "want one URL"},
		{with("--initial-cluster", "m2=http://127.0.0.1:2380"), `does not name --name "m1"`},
		{with("--initial-cluster", "m1=http://127.0.0.1:9999"), "not --listen-peer-urls"},
		{with("--initial-cluster", "m1"), "--initial-cluster"},
		{with("--initial-cluster", "m1=%zz"), "--initial-cluster"},
		{with("--initial-cluster-state", "sideways"), "member configuration"},
		{with("--quota-backend-bytes", "-1"), "--quota-backend-bytes"},
		{with("--max-txn-ops", "-5"), "invalid value"},
		{with("--election-timeout", "10"), "member configuration"},
		{append(append([]string(nil), good...), "extra"), `unexpected argument "extra"`},
		{[]string{"--no-such-flag"}, "not defined"},
	} {
		_, err := parseFlags(tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestRunUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--name"}, &out, &errOut); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, errOut.String())
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"--help"}, &out, &errOut); code != exitOK || !strings.Contains(errOut.String(), "READY") {
		t.Fatalf("--help: exit %d, usage %q", code, errOut.String())
	}
}
