package client

import (
	"context"
	"errors"

	"google.golang.org/grpc/credentials"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
)

// WithAPIKey sends key as "authorization: Bearer KEY" on every call (gRPC
// per-RPC credentials). Over a plaintext connection the key is sent only to
// a loopback address: anything else needs TLS, so that the key does not
// cross a network in the clear.
func WithAPIKey(key string) Option {
	return func(o *dialOptions) { o.apiKey = key }
}

// apiKeyCreds are the per-RPC credentials of WithAPIKey.
type apiKeyCreds struct {
	header   map[string]string
	loopback bool // the target is a loopback address: plaintext is allowed
}

var _ credentials.PerRPCCredentials = (*apiKeyCreds)(nil)

func newAPIKeyCreds(key, addr string) *apiKeyCreds {
	return &apiKeyCreds{header: map[string]string{"authorization": "Bearer " + key}, loopback: auth.IsLoopback(addr)}
}

// errPlaintextKey refuses to send a key in the clear to another machine.
var errPlaintextKey = errors.New("client: refusing to send the API key over a plaintext connection to a non-loopback address; use TLS")

func (c *apiKeyCreds) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	if !c.loopback {
		ri, _ := credentials.RequestInfoFromContext(ctx)
		if credentials.CheckSecurityLevel(ri.AuthInfo, credentials.PrivacyAndIntegrity) != nil {
			return nil, errPlaintextKey
		}
	}
	return c.header, nil
}

// RequireTransportSecurity is false so that loopback plaintext works;
// GetRequestMetadata enforces TLS for every other address.
func (c *apiKeyCreds) RequireTransportSecurity() bool { return false }

// CreateKey creates an API key (admin key required); the response holds
// the key, which the server cannot show again.
func (c *Client) CreateKey(ctx context.Context, req *pb.CreateKeyRequest) (*pb.CreateKeyResponse, error) {
	resp, err := c.api.CreateKey(ctx, req)
	if err != nil {
		return nil, asError(err)
	}
	return resp, nil
}

// ListKeys lists the API keys, without the keys (admin key required).
func (c *Client) ListKeys(ctx context.Context) (*pb.ListKeysResponse, error) {
	resp, err := c.api.ListKeys(ctx, &pb.ListKeysRequest{})
	if err != nil {
		return nil, asError(err)
	}
	return resp, nil
}

// RevokeKey revokes the API key name (admin key required).
func (c *Client) RevokeKey(ctx context.Context, name string) error {
	_, err := c.api.RevokeKey(ctx, &pb.RevokeKeyRequest{Name: name})
	return asError(err)
}
