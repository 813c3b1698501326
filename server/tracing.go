package server

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// tracing exports OpenTelemetry spans over OTLP/gRPC when
// Config.OTLPEndpoint is set: a span per RPC, its parent taken from the
// call's W3C trace context (traceparent), with the engine's spans under
// it. Without an endpoint there is no tracer, no stats handler and no
// cost.
type tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// tracePropagator reads and writes W3C trace context (traceparent,
// tracestate) in gRPC metadata.
var tracePropagator = propagation.TraceContext{}

// startTracing makes the tracer exporting to cfg.OTLPEndpoint, or nil
// without one. The exporter connects lazily: an endpoint that is down
// loses spans, never calls.
func startTracing(cfg Config) (*tracing, error) {
	if cfg.OTLPEndpoint == "" {
		return nil, nil
	}
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(cfg.OTLPEndpoint), otlptracegrpc.WithInsecure())
	if err != nil {
		return nil, err
	}
	res := sdkresource.NewSchemaless(attribute.String("service.name", "protobase"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.TraceSampleRatio))))
	return &tracing{tp: tp, tracer: tp.Tracer("github.com/protobase/protobase")}, nil
}

// serverOptions adds the stats handler that makes a span per RPC.
func (t *tracing) serverOptions() []grpc.ServerOption {
	if t == nil {
		return nil
	}
	h := otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(t.tp), otelgrpc.WithPropagators(tracePropagator))
	return []grpc.ServerOption{grpc.StatsHandler(h)}
}

// engineTracer is engine.Options.Tracer: nil without tracing.
func (t *tracing) engineTracer() trace.Tracer {
	if t == nil {
		return nil
	}
	return t.tracer
}

// httpHandler wraps h with a server span per REST request, its parent
// taken from the request's traceparent header. The span is named for the
// method alone: a path may carry record keys.
func (t *tracing) httpHandler(h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := tracePropagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := t.tracer.Start(ctx, "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// shutdown sends the spans still buffered, within a few seconds.
func (t *tracing) shutdown() error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return t.tp.Shutdown(ctx)
}
