package auth

import (
	"fmt"
	"slices"
	"strings"
)

// Scope is the set of record types a key may touch: exact full names and
// package prefixes. The zero Scope allows every type. A Scope is immutable.
type Scope struct {
	exact    map[string]struct{}
	packages []string // each ends with "."
	list     []string // as given, sorted
}

// ParseScope builds a scope from full type names ("shop.User") and package
// wildcards ("shop.*"); none means every type.
func ParseScope(types []string) (Scope, error) {
	if len(types) == 0 {
		return Scope{}, nil
	}
	s := Scope{exact: map[string]struct{}{}}
	for _, t := range types {
		t = strings.TrimSpace(t)
		name, wild := strings.CutSuffix(t, ".*")
		if !validFullName(name) {
			return Scope{}, fmt.Errorf("scope %q: want a record type's full name (shop.User) or a package wildcard (shop.*)", t)
		}
		if wild {
			s.packages = append(s.packages, name+".")
		} else {
			s.exact[name] = struct{}{}
		}
		s.list = append(s.list, t)
	}
	slices.Sort(s.list)
	s.list = slices.Compact(s.list)
	return s, nil
}

// validFullName reports whether s is a dotted sequence of identifiers.
func validFullName(s string) bool {
	if s == "" || len(s) > 512 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
		for i, c := range part {
			letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
			if !letter && (i == 0 || c < '0' || c > '9') {
				return false
			}
		}
	}
	return true
}

// All reports whether the scope allows every type.
func (s Scope) All() bool { return len(s.list) == 0 }

// Types returns the scope as given (sorted); nil for every type.
func (s Scope) Types() []string { return slices.Clone(s.list) }

// Allows reports whether the record type typeName (a full name, or a type
// URL ending in one) is in the scope.
func (s Scope) Allows(typeName string) bool {
	if s.All() {
		return true
	}
	if i := strings.LastIndexByte(typeName, '/'); i >= 0 {
		typeName = typeName[i+1:]
	}
	if _, ok := s.exact[typeName]; ok {
		return true
	}
	for _, p := range s.packages {
		if strings.HasPrefix(typeName, p) {
			return true
		}
	}
	return false
}

// Contains reports whether every type that other allows, s allows: the
// scope of a key that s may create, see or revoke. The unscoped scope
// contains every scope; a scoped one never contains the unscoped one. An
// exact name is contained by the same name or by a package wildcard it
// falls under; a package wildcard only by a wildcard of the same or an
// enclosing package, since exact names are finitely many and a wildcard
// allows names without end.
func (s Scope) Contains(other Scope) bool {
	if s.All() {
		return true
	}
	if other.All() {
		return false
	}
	for name := range other.exact {
		if !s.Allows(name) {
			return false
		}
	}
	for _, p := range other.packages {
		if !s.coversPackage(p) {
			return false
		}
	}
	return true
}

// Outside returns the entries of other (as given) that s does not contain,
// for error messages; nil when s contains other. For an unscoped other it
// is ["*"].
func (s Scope) Outside(other Scope) []string {
	if s.All() {
		return nil
	}
	if other.All() {
		return []string{"*"}
	}
	var out []string
	for _, t := range other.list {
		name, wild := strings.CutSuffix(t, ".*")
		if (wild && !s.coversPackage(name+".")) || (!wild && !s.Allows(name)) {
			out = append(out, t)
		}
	}
	return out
}

// coversPackage reports whether s has a wildcard for the package prefix p
// (ending with ".") or for a package enclosing it.
func (s Scope) coversPackage(p string) bool {
	for _, q := range s.packages {
		if strings.HasPrefix(p, q) {
			return true
		}
	}
	return false
}

// String renders the scope for messages: "every type", or its entries.
func (s Scope) String() string {
	if s.All() {
		return "every type"
	}
	return "types " + strings.Join(s.list, ",")
}

// Allowed is the authorization decision: may a key with role and scope do
// an operation that needs role need on the record type typeName? An empty
// typeName asks about the operation alone.
func Allowed(role Role, scope Scope, need Role, typeName string) bool {
	if role < need || role == RoleNone {
		return false
	}
	return typeName == "" || scope.Allows(typeName)
}
