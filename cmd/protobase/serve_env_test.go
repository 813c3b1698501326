package main

import (
	"bufio"
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/internal/exitstatus"
)

func TestApplyEnv(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string // "addr=... batch=..."
		wantErr string
	}{
		{"unset", nil, nil, "addr=127.0.0.1:7070 batch=0 sync=true", ""},
		{"from env", nil, map[string]string{"PROTOBASE_GRPC_ADDR": "127.0.0.1:9", "PROTOBASE_MAX_BATCH_RECORDS": "5", "PROTOBASE_SYNC": "false"}, "addr=127.0.0.1:9 batch=5 sync=false", ""},
		{"flag wins", []string{"--grpc-addr", "127.0.0.1:8"}, map[string]string{"PROTOBASE_GRPC_ADDR": "127.0.0.1:9"}, "addr=127.0.0.1:8 batch=0 sync=true", ""},
		{"empty is unset", nil, map[string]string{"PROTOBASE_GRPC_ADDR": ""}, "addr=127.0.0.1:7070 batch=0 sync=true", ""},
		{"other variables ignored", nil, map[string]string{"PROTOBASE_ADDR": "x", "GRPC_ADDR": "y"}, "addr=127.0.0.1:7070 batch=0 sync=true", ""},
		{"bad number", nil, map[string]string{"PROTOBASE_MAX_BATCH_RECORDS": "many"}, "", `$PROTOBASE_MAX_BATCH_RECORDS="many": `},
		{"bad bool", nil, map[string]string{"PROTOBASE_SYNC": "sometimes"}, "", `$PROTOBASE_SYNC="sometimes"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			addr := fs.String("grpc-addr", "127.0.0.1:7070", "")
			batch := fs.Int("max-batch-records", 0, "")
			sync := fs.Bool("sync", true, "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := applyEnv(fs, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := "addr=" + *addr + " batch=" + strconv.Itoa(*batch) + " sync=" + strconv.FormatBool(*sync)
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// serve takes its flags from the environment, logs JSON lines with
// --log-format json, and names types and indexes in its log lines.
func TestServeEnvAndJSONLog(t *testing.T) {
	t.Setenv("PROTOBASE_LOG_FORMAT", "json")
	t.Setenv("PROTOBASE_DATA", t.TempDir())
	t.Setenv("PROTOBASE_GRPC_ADDR", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve"}, strings.NewReader(""), &stdout, &stderr) }()
	// With JSON logs, the line saying where it serves is JSON too.
	re := regexp.MustCompile(`"msg":"protobase serving","addr":"([^"]+)","store":"data .*"}\n`)
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == "" && time.Now().Before(deadline); {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d\n%s", code, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if addr == "" {
		t.Fatalf("serve printed no address\n%s", stderr.String())
	}
	mustCLI(t, "", "--addr", addr, "schema", "apply", writeFile(t, t.TempDir(), "shop.proto", shopProto))
	cancel()
	<-done
	var msgs []string
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", sc.Text(), err)
		}
		msgs = append(msgs, line["msg"].(string))
	}
	if !strings.Contains(strings.Join(msgs, "|"), "schema applied") {
		t.Fatalf("no schema line in %q", msgs)
	}
}

func TestServeBadEnvAndLogFormat(t *testing.T) {
	r := cli(t, "", "serve", "--data", t.TempDir(), "--log-format", "xml")
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, `--log-format "xml": want text or json`)

	t.Setenv("PROTOBASE_MAX_BATCH_RECORDS", "lots")
	r = cli(t, "", "serve", "--data", t.TempDir())
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, `$PROTOBASE_MAX_BATCH_RECORDS="lots"`)
}
