package server_test

import "github.com/protobase/protobase/tests/robustness/harness"

// backend is a storage backend the behaviour tests run against, and
// backends the table of them: Pebble, etcd on one embedded member, and
// etcd as a cluster of three member processes (see harness.Backends,
// which the robustness tests share).
type backend = harness.Backend

var backends = harness.Backends
