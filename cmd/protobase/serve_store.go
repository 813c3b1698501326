package main

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/protobase/protobase/server"
)

// storeOptions are serve's storage flags: Pebble in --data (the default)
// or an etcd cluster that several servers share.
type storeOptions struct {
	store            string
	etcdEndpoints    []string
	etcdPrefix       string
	etcdCA           string
	etcdCert         string
	etcdKey          string
	etcdUser         string
	etcdPasswordFile string
	etcdTimeout      time.Duration
	etcdRetryTimeout time.Duration
}

func (o *storeOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.store, "store", server.StorePebble, "storage backend: pebble (in --data) or etcd (a cluster several servers share; see --etcd-endpoints)")
	f.StringSliceVar(&o.etcdEndpoints, "etcd-endpoints", nil, "etcd members' client addresses, HOST:PORT or http(s)://HOST:PORT, comma-separated (with --store etcd)")
	f.StringVar(&o.etcdPrefix, "etcd-prefix", "", "prefix of every etcd key the store writes (default \"/protobase/\"); one cluster can hold several stores")
	f.StringVar(&o.etcdCA, "etcd-ca", "", "PEM CA certificates verifying the etcd members; turns TLS on for etcd")
	f.StringVar(&o.etcdCert, "etcd-cert", "", "PEM client certificate presented to the etcd members")
	f.StringVar(&o.etcdKey, "etcd-key", "", "PEM private key of --etcd-cert")
	f.StringVar(&o.etcdUser, "etcd-user", "", "etcd user name (a cluster with auth enabled; needs --etcd-password-file)")
	f.StringVar(&o.etcdPasswordFile, "etcd-password-file", "", "file holding the password of --etcd-user")
	f.DurationVar(&o.etcdTimeout, "etcd-timeout", 30*time.Second, "bound on each attempt of an etcd request")
	f.DurationVar(&o.etcdRetryTimeout, "etcd-retry-timeout", 30*time.Second, "how long a request etcd does not serve (no leader, a member lost, no answer) is attempted again; past it a read fails Unavailable, a write that was not applied Unavailable, and one that may have been DeadlineExceeded")
}

// apply copies the flags into cfg.
func (o *storeOptions) apply(cfg *server.Config) {
	cfg.Store = o.store
	for _, ep := range o.etcdEndpoints {
		if ep = strings.TrimSpace(ep); ep != "" {
			cfg.Etcd.Endpoints = append(cfg.Etcd.Endpoints, ep)
		}
	}
	cfg.Etcd.Prefix = o.etcdPrefix
	cfg.Etcd.CAFile, cfg.Etcd.CertFile, cfg.Etcd.KeyFile = o.etcdCA, o.etcdCert, o.etcdKey
	cfg.Etcd.User, cfg.Etcd.PasswordFile = o.etcdUser, o.etcdPasswordFile
	cfg.Etcd.RequestTimeout = o.etcdTimeout
	cfg.Etcd.RetryTimeout = o.etcdRetryTimeout
}

// where says where the data lives, for serve's first line.
func (o *storeOptions) where(data string) string {
	if o.store == server.StoreEtcd {
		prefix := o.etcdPrefix
		if prefix == "" {
			prefix = "/protobase/"
		}
		return "etcd " + strings.Join(o.etcdEndpoints, ",") + " prefix " + prefix
	}
	return "data " + data
}
