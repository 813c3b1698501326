package main

import (
	"errors"

	"github.com/protobase/protobase/server"
)

// etcdFlags names the flag of each server.Config field that the lab's
// --store etcd sets.
var etcdFlags = map[string]string{
	"Etcd":           "the --etcd-* flags",
	"Etcd.Endpoints": "--etcd-endpoints",
	"Etcd.Prefix":    "--etcd-prefix",
}

// configError rewrites the server's configuration error in the lab's flag
// names.
func configError(err error) error {
	var ce *server.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	return errors.New(ce.Message(func(field string) string {
		if flag, ok := etcdFlags[field]; ok {
			return flag
		}
		return field
	}))
}
