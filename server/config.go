package server

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/store/pebble"
	natstransport "github.com/protobase/protobase/internal/transport/nats"
)

// ErrLocked is returned (wrapped) by Start when another server, in this
// process or another one, has the data directory open.
var ErrLocked = pebble.ErrLocked

// A ConfigError is a Config that Start refuses. Its message names Config
// fields; Message names them another way (the CLI names its flags).
type ConfigError struct {
	// Field is the Config field at fault.
	Field string
	// parts alternate the names of fields (even indexes) and the text
	// after each (odd indexes).
	parts []string
}

// configError builds a ConfigError from parts: a field name, the text
// after it, and optionally more fields, each followed by its text.
func configError(parts ...string) *ConfigError {
	return &ConfigError{Field: parts[0], parts: parts}
}

func (e *ConfigError) Error() string {
	return "server: " + e.Message(func(field string) string { return field })
}

// Message is the message with every Config field named by name(field).
func (e *ConfigError) Message(name func(field string) string) string {
	var b strings.Builder
	for i, p := range e.parts {
		if i%2 == 0 {
			p = name(p)
		}
		b.WriteString(p)
	}
	return b.String()
}

// Validate checks c's settings and returns a *ConfigError for the first
// one Start would refuse. Zero values mean defaults and are valid; Start
// calls Validate before anything else.
func (c Config) Validate() error {
	if c.DataDir == "" {
		return configError("DataDir", " must not be empty")
	}
	for _, f := range []struct {
		name     string
		negative bool
	}{
		{"MaxMessageBytes", c.MaxMessageBytes < 0},
		{"MaxRecordsPerBatch", c.MaxRecordsPerBatch < 0},
		{"MaxConditionsPerBatch", c.MaxConditionsPerBatch < 0},
		{"MaxConditionReads", c.MaxConditionReads < 0},
		{"MaxInflightBytes", c.MaxInflightBytes < 0},
		{"SearchWorkers", c.SearchWorkers < 0},
		{"MaxResultRecords", c.MaxResultRecords < 0},
		{"MaxResultBytes", c.MaxResultBytes < 0},
		{"MaxResultBufferBytes", c.MaxResultBufferBytes < 0},
		{"MaxSearchQueries", c.MaxSearchQueries < 0},
		{"MaxAggregateGroups", c.MaxAggregateGroups < 0},
		{"CacheBytes", c.CacheBytes < 0},
		{"MemTableBytes", c.MemTableBytes < 0},
		{"ShutdownTimeout", c.ShutdownTimeout < 0},
		{"SlowQuery", c.SlowQuery < 0},
		{"TLSReloadInterval", c.TLSReloadInterval < 0},
		{"HandshakeTimeout", c.HandshakeTimeout < 0},
		{"IdleTimeout", c.IdleTimeout < 0},
	} {
		if f.negative {
			return configError(f.name, " must not be negative")
		}
	}
	if err := c.HTTPLimits.validate(); err != nil {
		return err
	}
	if err := c.validateReceive(); err != nil {
		return err
	}
	switch {
	case c.Auth && c.InsecureNoAuth:
		return configError("Auth", " and ", "InsecureNoAuth", " are exclusive")
	case c.AdminKey != "" && auth.ParseKey(c.AdminKey) != nil:
		// The message never repeats the value: it is a secret.
		return configError("AdminKey", " is not an API key (pb_ and 32 base64url characters)")
	case c.NATS && c.NATSURL != "":
		return configError("NATS", " (embedded server) and ", "NATSURL", " (external server) are exclusive")
	case c.NATSAddr != "" && !c.NATS:
		return configError("NATSAddr", " is the embedded NATS server's address: it needs ", "NATS", "")
	case (c.NATSPrefix != "" || c.NATSQueue != "") && !c.NATS && c.NATSURL == "":
		return configError("NATSPrefix", " and ", "NATSQueue", " need ", "NATS", " or ", "NATSURL", "")
	}
	if err := c.validateStorage(); err != nil {
		return err
	}
	if err := c.validateMinimums(); err != nil {
		return err
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if c.NATSPrefix != "" && natstransport.ValidPrefix(c.NATSPrefix) != nil {
		return configError("NATSPrefix", " "+strconv.Quote(c.NATSPrefix)+": want subject tokens separated by dots, without wildcards or spaces, "+
			"not starting with $ or _INBOX (subjects NATS reserves)")
	}
	if strings.ContainsAny(c.NATSQueue, " \t\r\n*>") {
		return configError("NATSQueue", " "+strconv.Quote(c.NATSQueue)+": want a queue group name without wildcards or spaces")
	}
	return nil
}

// The least positive values of the size and time settings (0 is the
// default): below them a server does not run (Pebble panics on a memtable
// of 1 KiB) or does nothing useful (a message of 100 bytes holds no write
// request; a handshake timeout of 1 ns closes every connection).
const (
	leastMessageBytes   = 512
	leastCacheBytes     = 1 << 20
	leastMemTableBytes  = pebble.LeastMemTableBytes
	leastGoMemoryLimit  = 64 << 20
	leastWatchRetention = time.Second
	leastConnTimeout    = 100 * time.Millisecond
)

// validateMinimums refuses positive sizes and times below their minimum,
// a trace sample ratio outside [0, 1],
// and "none" spelled other than -1.
func (c Config) validateMinimums() error {
	if c.TraceSampleRatio < 0 || c.TraceSampleRatio > 1 {
		return configError("TraceSampleRatio", " must be between 0 and 1")
	}
	for _, f := range []struct {
		name   string
		v, min int64
		why    string
	}{
		{"MaxMessageBytes", int64(c.MaxMessageBytes), leastMessageBytes, " (a smaller message holds no write request)"},
		{"CacheBytes", c.CacheBytes, leastCacheBytes, ""},
		{"MemTableBytes", c.MemTableBytes, leastMemTableBytes, " (the storage engine needs that much)"},
		{"GoMemoryLimit", c.GoMemoryLimit, leastGoMemoryLimit, " (below it the Go runtime would collect garbage without pause)"},
	} {
		if f.v > 0 && f.v < f.min {
			least := strconv.FormatInt(f.min, 10) + " bytes"
			if f.min >= 1<<20 {
				least = strconv.FormatInt(f.min>>20, 10) + " MiB"
			}
			return configError(f.name, " "+strconv.FormatInt(f.v, 10)+" is too small: want at least "+least+f.why)
		}
	}
	for _, f := range []struct {
		name   string
		v, min time.Duration
	}{
		{"WatchRetention", c.WatchRetention, leastWatchRetention},
		{"HandshakeTimeout", c.HandshakeTimeout, leastConnTimeout},
		{"IdleTimeout", c.IdleTimeout, leastConnTimeout},
	} {
		if f.v > 0 && f.v < f.min {
			return configError(f.name, " "+f.v.String()+" is too short: want at least "+f.min.String())
		}
	}
	for _, f := range []struct {
		name string
		v    int64
		none string
	}{
		{"RecordCacheBytes", c.RecordCacheBytes, "no cache"},
		{"GoMemoryLimit", c.GoMemoryLimit, "none"},
		{"MaxConnections", int64(c.MaxConnections), "no cap"},
	} {
		if f.v < -1 {
			return configError(f.name, " "+strconv.FormatInt(f.v, 10)+": want -1 ("+f.none+"), 0 (the default) or a positive value")
		}
	}
	return nil
}

// validateSecurity checks the TLS and REST-hardening settings: files that
// only work in pairs, and settings that would do nothing.
func (c Config) validateSecurity() error {
	natsTLS := c.NATSTLSCAFile != "" || c.NATSTLSCertFile != "" || c.NATSTLSKeyFile != ""
	switch {
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return configError("TLSCertFile", " and ", "TLSKeyFile", " go together")
	case c.TLSClientCAFile != "" && c.TLSCertFile == "":
		return configError("TLSClientCAFile", " requires client certificates over TLS: it needs ", "TLSCertFile", " and ", "TLSKeyFile", "")
	case natsTLS && c.NATSURL == "":
		return configError("NATSTLSCAFile", ", ", "NATSTLSCertFile", " and ", "NATSTLSKeyFile", " are for the external NATS server: they need ", "NATSURL", "")
	case (c.NATSTLSCertFile == "") != (c.NATSTLSKeyFile == ""):
		return configError("NATSTLSCertFile", " and ", "NATSTLSKeyFile", " go together")
	case (len(c.HTTPAllowedOrigins) > 0 || len(c.HTTPAllowedHosts) > 0) && c.HTTPAddr == "":
		return configError("HTTPAllowedOrigins", " and ", "HTTPAllowedHosts", " need ", "HTTPAddr", "")
	}
	for _, o := range c.HTTPAllowedOrigins {
		u, err := url.Parse(strings.TrimSuffix(o, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			return configError("HTTPAllowedOrigins", " "+strconv.Quote(o)+": want an origin, scheme://host[:port] (http or https)")
		}
	}
	for _, h := range c.HTTPAllowedHosts {
		if h == "" || strings.ContainsAny(h, "/@ \t") {
			return configError("HTTPAllowedHosts", " "+strconv.Quote(h)+": want a host name (a port is ignored), without scheme or path")
		}
	}
	return nil
}

// withDefaults returns c with every zero setting that has a default set
// to it.
func (c Config) withDefaults() Config {
	if c.GRPCAddr == "" {
		c.GRPCAddr = "127.0.0.1:7070"
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 64 << 20
	}
	c = c.connDefaults()
	c.HTTPLimits = c.HTTPLimits.withDefaults(c.HandshakeTimeout, c.IdleTimeout)
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.MaxStreamsPerConn == 0 {
		c.MaxStreamsPerConn = 100
	}
	if c.MaxSearchQueries == 0 {
		c.MaxSearchQueries = 100_000
	}
	if c.WatchRetention == 0 {
		c.WatchRetention = DefaultWatchRetention
	}
	if c.WatchRetentionBytes == 0 {
		c.WatchRetentionBytes = DefaultWatchRetentionBytes
	}
	c = c.receiveDefaults()
	if c.NATS && c.NATSAddr == "" {
		c.NATSAddr = "127.0.0.1:4222"
	}
	if c.NATSPrefix == "" {
		c.NATSPrefix = natstransport.DefaultPrefix
	}
	if c.NATSQueue == "" {
		c.NATSQueue = natstransport.DefaultQueue
	}
	return c
}

// The change log's default retention (Config.WatchRetention and
// WatchRetentionBytes).
const (
	DefaultWatchRetention            = 24 * time.Hour
	DefaultWatchRetentionBytes int64 = 1 << 30
	// DefaultWatchTailBytes is Config.WatchTailBytes's default.
	DefaultWatchTailBytes int64 = engine.DefaultWatchTailBytes
)
