package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TLSServerError is the error of a call over a plaintext connection to a
// server that speaks TLS: gRPC alone reports only that the server's
// preface could not be read, which points nowhere. Its status is
// UNAVAILABLE, as the failed connection's was.
type TLSServerError struct {
	Addr string
}

func (e *TLSServerError) Error() string {
	return fmt.Sprintf("the server at %s speaks TLS and this client connected without it: dial with WithTLS (trusting the CA that signed the server's certificate)", e.Addr)
}

// GRPCStatus makes status.Code and status.FromError see UNAVAILABLE.
func (e *TLSServerError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

// tlsProbe returns the interceptors that turn a plaintext connection's
// failure to read the server's preface into a TLSServerError when the
// server at addr answers a TLS handshake.
func tlsProbe(addr string) []grpc.DialOption {
	check := func(err error) error {
		if err == nil || status.Code(err) != codes.Unavailable ||
			!strings.Contains(status.Convert(err).Message(), "error reading server preface") {
			return err
		}
		if speaksTLS(addr) {
			return &TLSServerError{Addr: addr}
		}
		return err
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return check(invoker(ctx, method, req, reply, cc, opts...))
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			return s, check(err)
		}),
	}
}

// speaksTLS reports whether the server at addr (host:port) completes a
// TLS handshake, or answers one with a TLS alert (it may want a client
// certificate). The probe sends no data and trusts nothing it receives.
func speaksTLS(addr string) bool {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	//nolint:gosec // a probe of the protocol only: nothing is sent or trusted over it
	tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	err = tc.HandshakeContext(ctx)
	var alert tls.AlertError
	return err == nil || errors.As(err, &alert)
}
