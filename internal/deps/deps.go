// Package deps pins the module's dependencies during bootstrap; removed once real code imports them.
package deps

import (
	_ "github.com/bufbuild/protocompile"
	_ "github.com/cockroachdb/pebble/v2"
	_ "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	_ "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "github.com/vbauerster/mpb/v8"
	_ "google.golang.org/genproto/googleapis/api/annotations"
	_ "google.golang.org/genproto/googleapis/rpc/errdetails"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/health"
	_ "google.golang.org/grpc/reflection"
	_ "google.golang.org/protobuf/types/dynamicpb"
	_ "golang.org/x/term"
)
