package auth

import (
	"fmt"
	"strings"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	pbgrpc "github.com/protobase/protobase/gen/protobase/v1/protobasev1grpc"
)

// Role is what a key may do. Roles are ordered: each allows what the
// roles below it allow.
type Role uint8

// The roles, lowest first. RoleNone is no access (and the zero value).
const (
	RoleNone Role = iota
	RoleRead
	RoleWrite
	RoleSchema
	RoleAdmin
)

var roleNames = [...]string{"none", "read", "write", "schema", "admin"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", r)
}

// ParseRole parses "read", "write", "schema" or "admin" (any case).
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames[1:] {
		if strings.EqualFold(s, n) {
			return Role(i + 1), nil
		}
	}
	return RoleNone, fmt.Errorf("role %q: want read, write, schema or admin", s)
}

// RoleFromProto converts the API's enum; unspecified or unknown values are
// RoleNone.
func RoleFromProto(r pb.KeyRole) Role {
	switch r {
	case pb.KeyRole_KEY_ROLE_READ:
		return RoleRead
	case pb.KeyRole_KEY_ROLE_WRITE:
		return RoleWrite
	case pb.KeyRole_KEY_ROLE_SCHEMA:
		return RoleSchema
	case pb.KeyRole_KEY_ROLE_ADMIN:
		return RoleAdmin
	}
	return RoleNone
}

// Proto converts r to the API's enum.
func (r Role) Proto() pb.KeyRole {
	switch r {
	case RoleRead:
		return pb.KeyRole_KEY_ROLE_READ
	case RoleWrite:
		return pb.KeyRole_KEY_ROLE_WRITE
	case RoleSchema:
		return pb.KeyRole_KEY_ROLE_SCHEMA
	case RoleAdmin:
		return pb.KeyRole_KEY_ROLE_ADMIN
	}
	return pb.KeyRole_KEY_ROLE_UNSPECIFIED
}

// Full gRPC method names that are not protobase.v1's.
const (
	healthPrefix     = "/grpc.health.v1.Health/"
	reflectionPrefix = "/grpc.reflection."
)

// methodRoles is the role each protobase.v1 RPC needs.
var methodRoles = map[string]Role{
	pbgrpc.Protobase_GetSchema_FullMethodName:   RoleRead,
	pbgrpc.Protobase_Search_FullMethodName:      RoleRead,
	pbgrpc.Protobase_Scan_FullMethodName:        RoleRead,
	pbgrpc.Protobase_Query_FullMethodName:       RoleRead,
	pbgrpc.Protobase_Get_FullMethodName:         RoleRead,
	pbgrpc.Protobase_Insert_FullMethodName:      RoleWrite,
	pbgrpc.Protobase_Update_FullMethodName:      RoleWrite,
	pbgrpc.Protobase_Upsert_FullMethodName:      RoleWrite,
	pbgrpc.Protobase_Remove_FullMethodName:      RoleWrite,
	pbgrpc.Protobase_Write_FullMethodName:       RoleWrite,
	pbgrpc.Protobase_ApplySchema_FullMethodName: RoleSchema,
	pbgrpc.Protobase_CreateKey_FullMethodName:   RoleAdmin,
	pbgrpc.Protobase_ListKeys_FullMethodName:    RoleAdmin,
	pbgrpc.Protobase_RevokeKey_FullMethodName:   RoleAdmin,
	pbgrpc.Protobase_Backup_FullMethodName:      RoleAdmin,
	pbgrpc.Protobase_Export_FullMethodName:      RoleRead,
	pbgrpc.Protobase_Watch_FullMethodName:       RoleRead,
}

// MethodRole returns the role a gRPC method (full name, "/pkg.Svc/Method")
// needs. Health is open (RoleNone, and no key needed: load balancers probe
// it); reflection needs read and shows only the types in scope; the lab
// service and any method not listed need admin, and a key without a scope
// (WholeStore), so that a service added later is closed until someone
// decides otherwise.
func MethodRole(fullMethod string) (need Role, open bool) {
	if r, ok := methodRoles[fullMethod]; ok {
		return r, false
	}
	switch {
	case strings.HasPrefix(fullMethod, healthPrefix):
		return RoleNone, true
	case strings.HasPrefix(fullMethod, reflectionPrefix):
		return RoleRead, false
	}
	return RoleAdmin, false
}

// WholeStore reports whether fullMethod is one MethodRole does not list
// (the lab service): such a method is not written against scopes (the
// lab's Sink runs queries on any type, its Stats counts them all), so it
// also needs a key without a scope.
func WholeStore(fullMethod string) bool {
	_, listed := methodRoles[fullMethod]
	return !listed && !strings.HasPrefix(fullMethod, healthPrefix) && !strings.HasPrefix(fullMethod, reflectionPrefix)
}

// IsReflection reports whether fullMethod is a gRPC reflection method.
func IsReflection(fullMethod string) bool { return strings.HasPrefix(fullMethod, reflectionPrefix) }
