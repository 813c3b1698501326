package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/internal/exitstatus"
)

// healthLong is health's --help text.
const healthLong = `Ask the server at --addr whether it is serving, with the standard gRPC
health check (grpc.health.v1.Health/Check), and exit 0 when it answers
SERVING, 1 otherwise: when it answers NOT_SERVING (it is shutting down),
cannot be reached, or does not answer within --timeout.

The health check needs no API key, so that a probe holds no secret:
--api-key and $PROTOBASE_API_KEY are not sent. Over TLS it takes --tls-ca
as every client command does. It runs without a
shell, so that a container image FROM scratch can use it as its
HEALTHCHECK, and a supervisor or load balancer as its probe. --service
asks about one gRPC service (for example protobase.v1.Protobase) instead
of the server as a whole.`

func (a *app) healthCommand() *cobra.Command {
	var (
		service string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "health [--service NAME] [--timeout D]",
		Short: "Check that the server at --addr is serving (exit 0) or not (exit 1)",
		Long:  healthLong,
		Example: `  protobase health
  protobase --addr db.internal:7070 --tls-ca ca.pem health --timeout 2s`,
		Args: cobra.NoArgs,
		RunE: exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return exitstatus.Usagef("--timeout %s: want a positive duration", timeout)
			}
			return a.health(cmd.Context(), service, timeout)
		}),
	}
	cmd.Flags().StringVar(&service, "service", "", "the gRPC service to ask about (empty: the server as a whole)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer, connecting included")
	return cmd
}

// health prints the server's answer and fails unless it is SERVING.
func (a *app) health(ctx context.Context, service string, timeout time.Duration) error {
	// No API key is sent: the health service needs none, and a key given
	// in the environment for other commands would be refused over
	// plaintext to a non-loopback address.
	tlsCfg, err := a.conn.TLSConfig()
	if err != nil {
		return exitstatus.UsageError(err)
	}
	var opts []client.Option
	if tlsCfg != nil {
		opts = append(opts, client.WithTLS(tlsCfg))
	}
	c, err := client.Dial(a.conn.Addr, opts...)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(c.Conn()).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("health of %s: no answer within %s: %w", a.conn.Addr, timeout, err)
		}
		return fmt.Errorf("health of %s: %w", a.conn.Addr, err)
	}
	if _, err := fmt.Fprintln(a.stdout, resp.GetStatus()); err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return &exitstatus.Error{Code: exitstatus.Failed}
	}
	return nil
}
