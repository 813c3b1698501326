package main

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/protobase/protobase/client"
)

// callError describes the failed call op to the server at addr: the status
// code and the server's message, or that the server could not be reached.
func callError(op, addr string, err error) error {
	var ce *client.Error
	var te *client.TLSServerError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: the server at %s speaks TLS: pass --tls-ca FILE (or set $PROTOBASE_TLS_CA), the CA that signed its certificate", op, addr)
	}
	if !errors.As(err, &ce) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if ce.Status.Code() == codes.Unavailable {
		return fmt.Errorf("%s: the server at %s is unavailable: %s", op, addr, ce.Status.Message())
	}
	return fmt.Errorf("%s failed (%s):\n%s", op, ce.Status.Code(), ce.Status.Message())
}
