package auth

import (
	"context"
	"sync/atomic"

	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Identity is an authenticated caller: the key's name, role and scope.
// Identities made from one key share its revocation flag. A nil *Identity
// is "authentication is off": it allows everything.
type Identity struct {
	Name  string
	Role  Role
	Scope Scope

	revoked *atomic.Bool
	gone    context.Context // cancelled once the key is revoked; nil: never
}

// Revoked reports whether the key was revoked since the call began; one
// atomic load, cheap enough for every message of a stream.
func (id *Identity) Revoked() bool { return id != nil && id.revoked != nil && id.revoked.Load() }

// WithRevocation returns a context that ends, with the revocation's
// UNAUTHENTICATED error as its cause, when the key is revoked, for a call
// that may wait long without a message of its own at which to check the
// key (a Watch with nothing to send). stop releases it. With
// authentication off (nil) it returns ctx.
func (id *Identity) WithRevocation(ctx context.Context) (_ context.Context, stop func()) {
	if id == nil || id.gone == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(id.gone, func() { cancel(errRevoked(id.Name)) })
	return ctx, func() {
		unhook()
		cancel(nil)
	}
}

// Scoped reports whether the identity is limited to some record types.
func (id *Identity) Scoped() bool { return id != nil && !id.Scope.All() }

// AllowsType reports whether the identity may touch records of typeName
// (a full name or a type URL).
func (id *Identity) AllowsType(typeName string) bool { return id == nil || id.Scope.Allows(typeName) }

// Manages reports whether id may create, list and revoke a key of role
// and scope: one whose role is no higher than id's and whose scope lies
// inside id's (Scope.Contains). Without it a scoped admin key could make
// an unscoped one, or revoke the keys of other scopes. A nil Identity
// (authentication off) manages every key.
func (id *Identity) Manages(role Role, scope Scope) bool {
	return id == nil || (role <= id.Role && id.Scope.Contains(scope))
}

// Check refuses a revoked key (UNAUTHENTICATED); streams call it for each
// message.
func (id *Identity) Check() error {
	if id.Revoked() {
		return errRevoked(id.Name)
	}
	return nil
}

// CheckType refuses a record type outside the scope (PERMISSION_DENIED).
func (id *Identity) CheckType(typeName string) error {
	if id.AllowsType(typeName) {
		return nil
	}
	return errTypeDenied(id.Name, typeName)
}

// CheckWrite refuses a write batch whose records or conditions reach a
// record type outside the scope: a condition reads a record's version or
// a query's matches, which a key may not learn of a type it may not read.
func (id *Identity) CheckWrite(records []*anypb.Any, conds []*pb.Condition) error {
	if err := id.CheckRecords(records); err != nil || id == nil || id.Scope.All() {
		return err
	}
	for i, c := range conds {
		var typeName string
		switch t := c.GetTarget().(type) {
		case *pb.Condition_Key:
			typeName = t.Key.GetTypeUrl()
		case *pb.Condition_Query:
			typeName = t.Query.GetType()
		default:
			continue // a record of the batch, checked above
		}
		if !id.Scope.Allows(typeName) {
			return ConditionDenied(id, i, typeName)
		}
	}
	return nil
}

// ActorName names the caller in audit lines: the key's name, or "-" when
// authentication is off.
func (id *Identity) ActorName() string {
	if id == nil {
		return "-"
	}
	return id.Name
}

type ctxKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the identity in ctx, if any.
func FromContext(ctx context.Context) (*Identity, bool) {
	id, ok := ctx.Value(ctxKey{}).(*Identity)
	return id, ok && id != nil
}

// Require is the per-call check of the service methods. With
// authentication off (on false) it returns a nil Identity, which allows
// everything. Otherwise the caller must have been authenticated (an
// Identity in ctx, put there by the transport), its key not revoked, and
// its role at least need.
func Require(ctx context.Context, on bool, need Role) (*Identity, error) {
	if !on {
		return nil, nil
	}
	id, ok := FromContext(ctx)
	if !ok {
		return nil, errNoKey()
	}
	if err := id.Check(); err != nil {
		return nil, err
	}
	if !Allowed(id.Role, id.Scope, need, "") {
		return nil, errRoleDenied(id, need)
	}
	return id, nil
}

// CheckRecords re-checks a key for one write batch: not revoked, and every
// record's type in scope. A record outside the scope fails the whole batch
// (before any of it is applied) with RecordDenied.
func (id *Identity) CheckRecords(records []*anypb.Any) error {
	if id == nil {
		return nil
	}
	if err := id.Check(); err != nil {
		return err
	}
	if id.Scope.All() {
		return nil
	}
	last := ""
	for i, r := range records {
		if r.GetTypeUrl() == last {
			continue
		}
		if !id.Scope.Allows(r.GetTypeUrl()) {
			return RecordDenied(id, i, r.GetTypeUrl())
		}
		last = r.GetTypeUrl()
	}
	return nil
}
