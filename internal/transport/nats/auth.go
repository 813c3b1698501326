package nats

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/protobase/protobase/internal/auth"
)

// KeyChecker reports whether key is a valid Protobase API key: a nil error
// accepts it, name identifies the key (its name, never the key itself: it
// shows in NATS monitoring, and Auth.Disconnect takes it) and role is what
// it may do, which bounds the subjects its connection may publish to. It is
// how the embedded NATS server asks Protobase's authentication about a
// connecting client, without this package knowing how keys are stored.
type KeyChecker func(ctx context.Context, key string) (name string, role auth.Role, err error)

// keyUserPrefix starts the NATS user name of a connection logged in with
// a key, so that no key name can pass for serviceUser or "anonymous".
const keyUserPrefix = "key:"

// serviceUser is the NATS user name of the Protobase service's own
// connection. Its password is random per process (Auth.ServiceOption).
const serviceUser = "protobase-service"

// checkTimeout bounds one KeyChecker call: NATS runs Check on the
// connecting client's read loop.
const checkTimeout = 5 * time.Second

// Auth is the embedded NATS server's client authentication
// (natsserver.Options.CustomClientAuthentication). It gives every
// connection one of three sets of permissions:
//
//   - the Protobase service's own connection, which logs in as
//     serviceUser with a password drawn at random when Auth is made (never
//     logged, never written anywhere), may do anything: it alone can
//     subscribe to PREFIX.> and so join the service's queue group;
//   - with a KeyChecker, a caller logs in with its API key as the token (or
//     as the password, under any user name); it may publish only to the
//     endpoints its key's role may call (PublishSubjects: a read key's
//     write batches never reach the service) and subscribe only to its own
//     inbox, InboxPrefix(key) + ".>", so it can neither read nor answer
//     other callers' requests, nor read their replies. Service discovery
//     ($SRV.>) is closed to it: the service's stats carry the last error
//     message of every endpoint, which may be about another caller's
//     request;
//   - without a KeyChecker (authentication off), any caller connects, may
//     publish to PREFIX.> and $SRV.> (so `nats micro ls` works) and may
//     subscribe to _INBOX.> only: it still cannot read requests or answer
//     them, but replies are not private.
//
// Connections of any other kind (routes, leaf nodes, gateways) are
// refused: the embedded server runs alone.
type Auth struct {
	prefix   string
	check    KeyChecker
	password string // the service connection's; immutable
}

var _ natsserver.Authentication = (*Auth)(nil)

// NewAuth makes the authentication of an embedded server whose API lives
// under prefix; check nil means Protobase runs without authentication.
func NewAuth(prefix string, check KeyChecker) (*Auth, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("nats: service credential: %w", err)
	}
	return &Auth{prefix: prefix, check: check, password: hex.EncodeToString(b[:])}, nil
}

// ServiceOption logs the Protobase service's connection in.
func (a *Auth) ServiceOption() nats.Option { return nats.UserInfo(serviceUser, a.password) }

// Check authenticates one connecting client and registers its permissions.
func (a *Auth) Check(c natsserver.ClientAuthentication) bool {
	if c.Kind() != natsserver.CLIENT {
		return false
	}
	o := c.GetOpts()
	if o.Username == serviceUser {
		if subtle.ConstantTimeCompare([]byte(o.Password), []byte(a.password)) != 1 {
			return false
		}
		c.RegisterUser(&natsserver.User{Username: serviceUser})
		return true
	}
	if a.check == nil {
		c.RegisterUser(&natsserver.User{Username: "anonymous", Permissions: callerPermissions("_INBOX.>", a.prefix+".>", "$SRV.>")})
		return true
	}
	key := o.Token
	if key == "" {
		key = o.Password
	}
	if key == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	name, role, err := a.check(ctx, key)
	if err != nil {
		return false
	}
	publish := PublishSubjects(a.prefix, role)
	if len(publish) == 0 {
		return false
	}
	c.RegisterUser(&natsserver.User{Username: keyUserPrefix + name, Permissions: callerPermissions(InboxPrefix(key)+".>", publish...)})
	return true
}

// Disconnect closes the connections of ns logged in with the key named
// name, and returns how many it closed: a key checked at connect time
// would otherwise keep its connection after being revoked. A client that
// reconnects is checked again.
func (a *Auth) Disconnect(ns *natsserver.Server, name string) (int, error) {
	cz, err := ns.Connz(&natsserver.ConnzOptions{User: keyUserPrefix + name, Username: true, Limit: 1 << 20})
	if err != nil {
		return 0, fmt.Errorf("nats: list connections of key %q: %w", name, err)
	}
	n := 0
	for _, ci := range cz.Conns {
		if ns.DisconnectClientByID(ci.Cid) == nil {
			n++
		}
	}
	return n, nil
}

func callerPermissions(inbox string, publish ...string) *natsserver.Permissions {
	return &natsserver.Permissions{
		Publish:   &natsserver.SubjectPermission{Allow: publish},
		Subscribe: &natsserver.SubjectPermission{Allow: []string{inbox}},
	}
}

// InboxPrefix is the inbox prefix a caller authenticating with key must
// use (nats.CustomInboxPrefix), since its NATS user may subscribe only
// under it: "_INBOX." followed by the first 32 hex digits of
// SHA-256("protobase-nats-inbox:" + key). Every connection with one key
// shares it; the key cannot be recovered from it.
func InboxPrefix(key string) string {
	h := sha256.Sum256([]byte("protobase-nats-inbox:" + key))
	return "_INBOX." + hex.EncodeToString(h[:16])
}

// ClientOptions are the nats.go options of a caller authenticating with
// key: the key as token and the inbox prefix its permissions allow.
func ClientOptions(key string) []nats.Option {
	return []nats.Option{nats.Token(key), nats.CustomInboxPrefix(InboxPrefix(key))}
}
