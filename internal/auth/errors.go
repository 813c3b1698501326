package auth

import (
	"fmt"
	"strings"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
)

// The errors of this package, in one place: each transport renders them
// through apierror.Status like any engine error (UNAUTHENTICATED is 401 on
// REST, PERMISSION_DENIED 403). No message ever holds a key.

func unauthenticated(msg string, err error) error {
	return &apierror.Error{Code: apierror.Unauthenticated, Msg: msg, Err: err}
}

func errNoKey() error {
	return unauthenticated("no API key: send the header authorization: Bearer KEY", nil)
}

func errBadHeader(err error) error { return unauthenticated(err.Error(), err) }

func errUnknownKey() error { return unauthenticated("unknown or revoked API key", nil) }

func errRevoked(name string) error {
	return unauthenticated(fmt.Sprintf("API key %q was revoked", name), nil)
}

func permissionDenied(msg string) error {
	return &apierror.Error{Code: apierror.PermissionDenied, Msg: msg}
}

func errRoleDenied(id *Identity, need Role) error {
	return permissionDenied(fmt.Sprintf("API key %q has role %s; this call needs %s", id.Name, id.Role, need))
}

// ErrScopedDenied refuses id, a key with a scope, a method that reads or
// reports every type.
func ErrScopedDenied(id *Identity, method string) error {
	return permissionDenied(fmt.Sprintf("API key %q has a scope; %s reads every record type and needs a key without one", id.Name, method))
}

func errTypeDenied(name, typeName string) error {
	return permissionDenied(fmt.Sprintf("API key %q may not access record type %s", name, typeName))
}

// errCreateDenied refuses a key that by may not create (see
// Identity.Manages): it names the caller, the key asked for, and what lies
// beyond the caller's role or scope.
func errCreateDenied(by *Identity, role Role, scope Scope) error {
	var why string
	if role > by.Role {
		why = fmt.Sprintf("role %s is above its own role %s", role, by.Role)
	} else {
		why = fmt.Sprintf("it reaches only %s, and %s lies outside them", by.Scope, strings.Join(by.Scope.Outside(scope), ","))
		if scope.All() {
			why = fmt.Sprintf("it reaches only %s, not every type", by.Scope)
		}
	}
	return permissionDenied(fmt.Sprintf("API key %q may not create a key with role %s and %s: %s; a key creates, lists and revokes only keys inside its own role and types",
		by.Name, role, scope, why))
}

// RecordDenied is the error of a write batch holding record i of a type
// outside the scope: PERMISSION_DENIED with a WriteError naming the record
// and its type (the writer stamps the batch ordinal and counts).
func RecordDenied(id *Identity, i int, typeURL string) error {
	reason := fmt.Sprintf("API key %q may not write record type %s", id.ActorName(), typeURL)
	return &apierror.Error{Code: apierror.PermissionDenied, Msg: reason,
		Write: &pb.WriteError{Record: uint64(i), TypeUrl: typeURL, Reason: reason}}
}

// Invalid is an INVALID_ARGUMENT error about a key-management request.
func Invalid(msg string) error { return &apierror.Error{Code: apierror.InvalidArgument, Msg: msg} }

// errNoKeyring answers key management on a server built without keys.
var errNoKeyring = &apierror.Error{Code: apierror.Unimplemented, Msg: "this server does not manage API keys"}

func errExists(name string) error {
	return &apierror.Error{Code: apierror.AlreadyExists, Msg: fmt.Sprintf("an API key named %q exists", name)}
}

// errNotFound answers a name that does not exist and, in the same words, a
// key outside the caller's view (Keyring.Revoke).
func errNotFound(name string) error {
	return &apierror.Error{Code: apierror.NotFound, Msg: fmt.Sprintf("no API key named %q", name)}
}

// ConditionDenied is the PERMISSION_DENIED of a write batch's condition i
// on a record type outside the caller's scope.
func ConditionDenied(id *Identity, i int, typeName string) error {
	reason := fmt.Sprintf("API key %q may not read record type %s, which condition %d names", id.ActorName(), typeName, i)
	c := uint32(i) //nolint:gosec // a batch's conditions are bounded far below 2^32
	return &apierror.Error{Code: apierror.PermissionDenied, Msg: reason,
		Write: &pb.WriteError{Condition: &c, TypeUrl: typeName, Reason: reason}}
}
