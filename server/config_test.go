package server_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/protobase/protobase/server"
)

func TestConfigValidate(t *testing.T) {
	ok := server.Config{DataDir: "d"}
	with := func(f func(*server.Config)) server.Config {
		c := ok
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name  string
		cfg   server.Config
		field string // "" when valid
		msg   string
	}{
		{"defaults", ok, "", ""},
		{"everything set", server.Config{DataDir: "d", GRPCAddr: "127.0.0.1:0", HTTPAddr: ":8080", NATS: true, NATSAddr: ":4222",
			NATSPrefix: "shop.v1", NATSQueue: "workers", MaxMessageBytes: 512, MaxRecordsPerBatch: 1, MaxInflightBytes: 1,
			SearchWorkers: 1, MaxResultRecords: 1, MaxResultBytes: 1, CacheBytes: 1 << 20, MemTableBytes: 4 << 20,
			GoMemoryLimit: 64 << 20, RecordCacheBytes: -1, MaxConnections: -1, WatchRetention: time.Second,
			HandshakeTimeout: 100 * time.Millisecond, IdleTimeout: 100 * time.Millisecond, ShutdownTimeout: time.Second}, "", ""},
		{"external NATS", with(func(c *server.Config) { c.NATSURL, c.NATSPrefix = "nats://x:4222", "p" }), "", ""},
		{"no data dir", server.Config{}, "DataDir", "server: DataDir must not be empty"},
		{"negative MaxMessageBytes", with(func(c *server.Config) { c.MaxMessageBytes = -1 }), "MaxMessageBytes", "server: MaxMessageBytes must not be negative"},
		{"negative MaxRecordsPerBatch", with(func(c *server.Config) { c.MaxRecordsPerBatch = -1 }), "MaxRecordsPerBatch", "must not be negative"},
		{"negative MaxInflightBytes", with(func(c *server.Config) { c.MaxInflightBytes = -1 }), "MaxInflightBytes", "must not be negative"},
		{"negative SearchWorkers", with(func(c *server.Config) { c.SearchWorkers = -1 }), "SearchWorkers", "must not be negative"},
		{"negative MaxResultRecords", with(func(c *server.Config) { c.MaxResultRecords = -1 }), "MaxResultRecords", "must not be negative"},
		{"negative MaxResultBytes", with(func(c *server.Config) { c.MaxResultBytes = -1 }), "MaxResultBytes", "must not be negative"},
		{"negative CacheBytes", with(func(c *server.Config) { c.CacheBytes = -1 }), "CacheBytes", "must not be negative"},
		{"negative MemTableBytes", with(func(c *server.Config) { c.MemTableBytes = -1 }), "MemTableBytes", "must not be negative"},
		{"negative ShutdownTimeout", with(func(c *server.Config) { c.ShutdownTimeout = -time.Second }), "ShutdownTimeout", "must not be negative"},
		{"tiny MemTableBytes", with(func(c *server.Config) { c.MemTableBytes = 1 }), "MemTableBytes",
			"server: MemTableBytes 1 is too small: want at least 4 MiB (the storage engine needs that much)"},
		{"tiny CacheBytes", with(func(c *server.Config) { c.CacheBytes = 1000 }), "CacheBytes", "CacheBytes 1000 is too small: want at least 1 MiB"},
		{"tiny MaxMessageBytes", with(func(c *server.Config) { c.MaxMessageBytes = 100 }), "MaxMessageBytes", "want at least 512 bytes"},
		{"tiny GoMemoryLimit", with(func(c *server.Config) { c.GoMemoryLimit = 1 }), "GoMemoryLimit", "want at least 64 MiB"},
		{"GoMemoryLimit -2", with(func(c *server.Config) { c.GoMemoryLimit = -2 }), "GoMemoryLimit", "GoMemoryLimit -2: want -1 (none), 0 (the default) or a positive value"},
		{"RecordCacheBytes -2", with(func(c *server.Config) { c.RecordCacheBytes = -2 }), "RecordCacheBytes",
			"server: RecordCacheBytes -2: want -1 (no cache), 0 (the default) or a positive value"},
		{"MaxConnections -2", with(func(c *server.Config) { c.MaxConnections = -2 }), "MaxConnections", "want -1 (no cap)"},
		{"tiny WatchRetention", with(func(c *server.Config) { c.WatchRetention = time.Millisecond }), "WatchRetention", "WatchRetention 1ms is too short: want at least 1s"},
		{"tiny HandshakeTimeout", with(func(c *server.Config) { c.HandshakeTimeout = time.Nanosecond }), "HandshakeTimeout", "want at least 100ms"},
		{"tiny IdleTimeout", with(func(c *server.Config) { c.IdleTimeout = time.Millisecond }), "IdleTimeout", "want at least 100ms"},
		{"both NATS", with(func(c *server.Config) { c.NATS, c.NATSURL = true, "nats://x:4222" }), "NATS",
			"server: NATS (embedded server) and NATSURL (external server) are exclusive"},
		{"NATSAddr alone", with(func(c *server.Config) { c.NATSAddr = ":4222" }), "NATSAddr",
			"server: NATSAddr is the embedded NATS server's address: it needs NATS"},
		{"NATSPrefix alone", with(func(c *server.Config) { c.NATSPrefix = "p" }), "NATSPrefix",
			"server: NATSPrefix and NATSQueue need NATS or NATSURL"},
		{"NATSQueue alone", with(func(c *server.Config) { c.NATSQueue = "q" }), "NATSPrefix", "need NATS or NATSURL"},
		{"prefix wildcard", with(func(c *server.Config) { c.NATS, c.NATSPrefix = true, "shop.*" }), "NATSPrefix",
			`server: NATSPrefix "shop.*": want subject tokens separated by dots, without wildcards or spaces`},
		{"prefix $SYS", with(func(c *server.Config) { c.NATS, c.NATSPrefix = true, "$SYS" }), "NATSPrefix",
			`server: NATSPrefix "$SYS": want subject tokens separated by dots, without wildcards or spaces, not starting with $ or _INBOX (subjects NATS reserves)`},
		{"prefix $JS.API", with(func(c *server.Config) { c.NATSURL, c.NATSPrefix = "nats://x:4222", "$JS.API.x" }), "NATSPrefix", "not starting with $ or _INBOX"},
		{"prefix _INBOX", with(func(c *server.Config) { c.NATS, c.NATSPrefix = true, "_INBOX" }), "NATSPrefix", "not starting with $ or _INBOX"},
		{"prefix _INBOX token", with(func(c *server.Config) { c.NATS, c.NATSPrefix = true, "_INBOX_x.svc" }), "NATSPrefix", "not starting with $ or _INBOX"},
		{"prefix inbox later", with(func(c *server.Config) { c.NATS, c.NATSPrefix = true, "shop._INBOX" }), "", ""},
		{"prefix empty token", with(func(c *server.Config) { c.NATS, c.NATSPrefix = true, "a..b" }), "NATSPrefix", `"a..b"`},
		{"prefix space", with(func(c *server.Config) { c.NATS, c.NATSPrefix = true, "a b" }), "NATSPrefix", `"a b"`},
		{"queue space", with(func(c *server.Config) { c.NATS, c.NATSQueue = true, "q 1" }), "NATSQueue",
			`server: NATSQueue "q 1": want a queue group name without wildcards or spaces`},
		{"queue wildcard", with(func(c *server.Config) { c.NATSURL, c.NATSQueue = "nats://x:4222", "q>" }), "NATSQueue", `"q>"`},
		{"TLS", with(func(c *server.Config) {
			c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile, c.TLSReloadInterval = "c.pem", "k.pem", "ca.pem", time.Second
		}), "", ""},
		{"external NATS over TLS", with(func(c *server.Config) {
			c.NATSURL, c.NATSTLSCAFile, c.NATSTLSCertFile, c.NATSTLSKeyFile = "tls://x:4222", "ca.pem", "c.pem", "k.pem"
		}), "", ""},
		{"REST hardening", with(func(c *server.Config) {
			c.HTTPAddr = ":8080"
			c.HTTPAllowedOrigins = []string{"https://app.example", "http://localhost:3000/"}
			c.HTTPAllowedHosts = []string{"db.example", "db.example:8080"}
		}), "", ""},
		{"negative TLSReloadInterval", with(func(c *server.Config) { c.TLSReloadInterval = -time.Second }), "TLSReloadInterval", "must not be negative"},
		{"cert without key", with(func(c *server.Config) { c.TLSCertFile = "c.pem" }), "TLSCertFile", "server: TLSCertFile and TLSKeyFile go together"},
		{"key without cert", with(func(c *server.Config) { c.TLSKeyFile = "k.pem" }), "TLSCertFile", "go together"},
		{"client CA without cert", with(func(c *server.Config) { c.TLSClientCAFile = "ca.pem" }), "TLSClientCAFile",
			"server: TLSClientCAFile requires client certificates over TLS: it needs TLSCertFile and TLSKeyFile"},
		{"NATS CA without NATSURL", with(func(c *server.Config) { c.NATSTLSCAFile = "ca.pem" }), "NATSTLSCAFile",
			"server: NATSTLSCAFile, NATSTLSCertFile and NATSTLSKeyFile are for the external NATS server: they need NATSURL"},
		{"NATS cert with embedded NATS", with(func(c *server.Config) { c.NATS, c.NATSTLSCertFile, c.NATSTLSKeyFile = true, "c.pem", "k.pem" }),
			"NATSTLSCAFile", "they need NATSURL"},
		{"NATS cert without key", with(func(c *server.Config) { c.NATSURL, c.NATSTLSCertFile = "tls://x:4222", "c.pem" }), "NATSTLSCertFile",
			"server: NATSTLSCertFile and NATSTLSKeyFile go together"},
		{"NATS key without cert", with(func(c *server.Config) { c.NATSURL, c.NATSTLSKeyFile = "tls://x:4222", "k.pem" }), "NATSTLSCertFile", "go together"},
		{"origins without HTTPAddr", with(func(c *server.Config) { c.HTTPAllowedOrigins = []string{"https://a.example"} }), "HTTPAllowedOrigins",
			"server: HTTPAllowedOrigins and HTTPAllowedHosts need HTTPAddr"},
		{"hosts without HTTPAddr", with(func(c *server.Config) { c.HTTPAllowedHosts = []string{"a.example"} }), "HTTPAllowedOrigins", "need HTTPAddr"},
		{"origin without scheme", with(func(c *server.Config) { c.HTTPAddr, c.HTTPAllowedOrigins = ":8080", []string{"a.example"} }), "HTTPAllowedOrigins",
			`server: HTTPAllowedOrigins "a.example": want an origin, scheme://host[:port] (http or https)`},
		{"origin with path", with(func(c *server.Config) { c.HTTPAddr, c.HTTPAllowedOrigins = ":8080", []string{"https://a.example/app"} }), "HTTPAllowedOrigins", `"https://a.example/app"`},
		{"origin wildcard", with(func(c *server.Config) { c.HTTPAddr, c.HTTPAllowedOrigins = ":8080", []string{"*"} }), "HTTPAllowedOrigins", `"*"`},
		{"host with scheme", with(func(c *server.Config) { c.HTTPAddr, c.HTTPAllowedHosts = ":8080", []string{"https://a.example"} }), "HTTPAllowedHosts",
			`server: HTTPAllowedHosts "https://a.example": want a host name`},
		{"empty host", with(func(c *server.Config) { c.HTTPAddr, c.HTTPAllowedHosts = ":8080", []string{""} }), "HTTPAllowedHosts", `""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *server.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Validate = %v, want a *ConfigError", err)
			}
			if ce.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Validate = %q (field %s), want field %s and %q", err, ce.Field, tc.field, tc.msg)
			}
		})
	}
}

// Start refuses what Validate refuses, before it touches the directory.
func TestStartValidates(t *testing.T) {
	_, err := server.Start(context.Background(), server.Config{DataDir: t.TempDir(), GRPCAddr: "127.0.0.1:0", MaxMessageBytes: -1})
	var ce *server.ConfigError
	if !errors.As(err, &ce) || ce.Field != "MaxMessageBytes" {
		t.Fatalf("Start = %v, want the MaxMessageBytes ConfigError", err)
	}
}

// A memtable too small for the storage engine is a ConfigError, not a
// panic, and the data directory is not created.
func TestStartRefusesTinyMemtable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	_, err := server.Start(context.Background(), server.Config{DataDir: dir, GRPCAddr: "127.0.0.1:0", MemTableBytes: 1})
	var ce *server.ConfigError
	if !errors.As(err, &ce) || ce.Field != "MemTableBytes" {
		t.Fatalf("Start = %v, want the MemTableBytes ConfigError", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused start left %s behind: %v", dir, err)
	}
}

func TestConfigErrorMessage(t *testing.T) {
	err := server.Config{DataDir: "d", NATSPrefix: "p"}.Validate()
	var ce *server.ConfigError
	if !errors.As(err, &ce) {
		t.Fatal(err)
	}
	got := ce.Message(func(f string) string { return "<" + f + ">" })
	if want := "<NATSPrefix> and <NATSQueue> need <NATS> or <NATSURL>"; got != want {
		t.Fatalf("Message = %q, want %q", got, want)
	}
}

// A second server on a directory in use fails with ErrLocked.
func TestStartLockedDataDir(t *testing.T) {
	ts := startServer(t, server.Config{})
	_, err := server.Start(context.Background(), server.Config{DataDir: ts.Cfg.DataDir, GRPCAddr: "127.0.0.1:0"})
	if !errors.Is(err, server.ErrLocked) {
		t.Fatalf("Start = %v, want ErrLocked", err)
	}
}
