package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/internal/exitstatus"
	"github.com/protobase/protobase/server"
)

// checkEmptyFlags refuses an address or name flag given as "": in
// server.Config an empty value means the default or "off", which the user
// who typed the flag did not ask for.
func checkEmptyFlags(cmd *cobra.Command) error {
	for _, name := range []string{"data", "nats-addr", "nats-url", "http-addr", "nats-prefix", "nats-queue", "store", "etcd-prefix"} {
		f := cmd.Flags().Lookup(name)
		if f.Changed && f.Value.String() == "" {
			return exitstatus.Usagef("--%s must not be empty", name)
		}
	}
	return nil
}

// checkOffFlags refuses a negative value for the flags whose 0 turns
// something off: server.Config reads a negative value as "off" too, so
// without this check --watch-retention -1h would pass for 0.
func checkOffFlags(o serveOptions) error {
	switch {
	case o.watchRetention < 0:
		return exitstatus.Usagef("--watch-retention %s: want 0 (no change log) or a positive duration", o.watchRetention)
	case o.watchRetBytes < 0:
		return exitstatus.Usagef("--watch-retention-bytes %d: want 0 (no byte bound) or a positive size", o.watchRetBytes)
	case o.watchTailBytes < 0:
		return exitstatus.Usagef("--watch-tail-bytes %d: want 0 (none) or a positive size", o.watchTailBytes)
	}
	return nil
}

// serveConfig is the server.Config of serve's flags. NATS settings the
// user did not give stay zero (server defaults), so that server.Config's
// Validate can tell a setting that would do nothing.
func serveConfig(cmd *cobra.Command, o serveOptions) server.Config {
	changed := cmd.Flags().Changed
	cfg := server.Config{
		DataDir:            o.data,
		GRPCAddr:           o.grpcAddr,
		MetricsAddr:        o.metricsAddr,
		HTTPAddr:           o.httpAddr,
		NATS:               o.nats,
		NATSURL:            o.natsURL,
		NoSync:             !o.sync,
		MaxMessageBytes:    o.maxMessageBytes,
		MaxRecordsPerBatch: o.maxBatchRecords,
		MaxInflightBytes:   o.maxInflightBytes,
		CacheBytes:         o.cacheBytes,
		MemTableBytes:      o.memTableBytes,
		RecordCacheBytes:   o.recordCacheBytes,
		GoMemoryLimit:      o.goMemoryLimit,
		ShutdownTimeout:    o.shutdownTimeout,
		SlowQuery:          o.slowQuery,
		OTLPEndpoint:       o.otlpEndpoint,
		TraceSampleRatio:   o.traceSampleRatio,
		TTLReapInterval:    reapInterval(o.ttlReapInterval),
		Lab:                o.lab,
		Auth:               o.auth,
		InsecureNoAuth:     o.insecureNoAuth,
		AdminKey:           os.Getenv("PROTOBASE_ADMIN_KEY"),

		MaxConditionsPerBatch: o.maxBatchConds,
		MaxConditionReads:     o.maxCondReads,

		MaxStreamsPerConn:    o.maxStreamsPerConn,
		MaxResultBufferBytes: o.maxResultBufferBytes,
		MaxSearchQueries:     o.maxSearchQueries,
		MaxAggregateGroups:   o.maxAggregateGroups,

		MaxReceiveBufferBytes:  o.maxReceiveBytes,
		MaxReceiveBytesPerConn: o.maxReceivePerConn,

		HandshakeTimeout: o.handshakeTimeout,
		IdleTimeout:      o.idleTimeout,
		MaxConnections:   o.maxConnections,
	}
	// In the flags 0 turns the log (or its byte bound) off; in Config
	// 0 is the default and a negative value is off.
	if cfg.WatchRetention = o.watchRetention; cfg.WatchRetention <= 0 {
		cfg.WatchRetention = -1
	}
	if cfg.WatchRetentionBytes = o.watchRetBytes; cfg.WatchRetentionBytes <= 0 {
		cfg.WatchRetentionBytes = -1
	}
	if cfg.WatchTailBytes = o.watchTailBytes; cfg.WatchTailBytes <= 0 {
		cfg.WatchTailBytes = -1
	}
	if o.nats || changed("nats-addr") {
		cfg.NATSAddr = o.natsAddr
	}
	if changed("nats-prefix") {
		cfg.NATSPrefix = o.natsPrefix
	}
	cfg.NATSKeyBytesPerSecond = o.natsKeyRate
	if changed("nats-queue") {
		cfg.NATSQueue = o.natsQueue
	}
	return cfg
}

// configFlags names the serve flag of each server.Config field it sets.
var configFlags = map[string]string{
	"DataDir":               "--data",
	"GRPCAddr":              "--grpc-addr",
	"MetricsAddr":           "--metrics-addr",
	"OTLPEndpoint":          "--otlp-endpoint",
	"TraceSampleRatio":      "--trace-sample-ratio",
	"HTTPAddr":              "--http-addr",
	"NATS":                  "--nats",
	"NATSAddr":              "--nats-addr",
	"NATSURL":               "--nats-url",
	"NATSPrefix":            "--nats-prefix",
	"NATSQueue":             "--nats-queue",
	"NATSKeyBytesPerSecond": "--nats-key-bytes-per-second",
	"MaxMessageBytes":       "--max-message-bytes",
	"MaxRecordsPerBatch":    "--max-batch-records",
	"MaxConditionsPerBatch": "--max-batch-conditions",
	"MaxConditionReads":     "--max-condition-reads",
	"MaxInflightBytes":      "--max-inflight-bytes",
	"CacheBytes":            "--cache-bytes",
	"MemTableBytes":         "--memtable-bytes",
	"RecordCacheBytes":      "--record-cache-bytes",
	"GoMemoryLimit":         "--go-memory-limit",
	"ShutdownTimeout":       "--shutdown-timeout",
	"WatchRetention":        "--watch-retention",
	"WatchRetentionBytes":   "--watch-retention-bytes",
	"WatchTailBytes":        "--watch-tail-bytes",
	"Auth":                  "--auth",
	"InsecureNoAuth":        "--insecure-no-auth",
	"AdminKey":              "PROTOBASE_ADMIN_KEY",
	"TLSCertFile":           "--tls-cert",
	"TLSKeyFile":            "--tls-key",
	"TLSClientCAFile":       "--tls-client-ca",
	"HTTPAllowedOrigins":    "--http-allowed-origins",
	"HTTPAllowedHosts":      "--http-allowed-hosts",
	"NATSTLSCAFile":         "--nats-tls-ca",
	"NATSTLSCertFile":       "--nats-tls-cert",
	"NATSTLSKeyFile":        "--nats-tls-key",
	"NoSync":                "--sync=false",
	"Store":                 "--store",
	"Etcd":                  "the --etcd-* flags",
	"Etcd.Endpoints":        "--etcd-endpoints",
	"Etcd.Prefix":           "--etcd-prefix",
	"Etcd.CertFile":         "--etcd-cert",
	"Etcd.KeyFile":          "--etcd-key",
	"Etcd.User":             "--etcd-user",
	"Etcd.PasswordFile":     "--etcd-password-file",

	"MaxStreamsPerConn":    "--max-streams-per-conn",
	"MaxResultBufferBytes": "--max-result-buffer-bytes",
	"MaxSearchQueries":     "--max-search-queries",
	"MaxAggregateGroups":   "--max-aggregate-groups",

	"MaxReceiveBufferBytes":  "--max-receive-buffer-bytes",
	"MaxReceiveBytesPerConn": "--max-receive-bytes-per-conn",

	"HandshakeTimeout": "--handshake-timeout",
	"IdleTimeout":      "--idle-timeout",
	"MaxConnections":   "--max-connections",
}

// configError words a server.Config refusal in serve's flags.
func configError(err error) error {
	var ce *server.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	return errors.New(ce.Message(func(field string) string {
		if flag, ok := configFlags[field]; ok {
			return flag
		}
		return field
	}))
}

// printTransports tells where REST and NATS listen, as serve prints the
// gRPC address.
func printTransports(out announcer, srv *server.Server, o serveOptions) {
	if h := srv.HTTPAddr(); h != "" {
		url := httpScheme(srv) + "://" + h
		out.line(fmt.Sprintf("REST/JSON on %s (OpenAPI at /openapi.json)", url),
			"REST/JSON", "url", url, "openapi", url+"/openapi.json")
	}
	if u := srv.NATSURL(); u != "" {
		out.line(fmt.Sprintf("NATS on %s (subjects %s.*, queue group %s)", u, o.natsPrefix, o.natsQueue),
			"NATS", "url", u, "subjects", o.natsPrefix+".*", "queue_group", o.natsQueue)
	}
}

// reapInterval is server.Config's TTLReapInterval of the flag: 0, which
// the flag documents as never, is negative there (0 is the default).
func reapInterval(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
