package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Verifier authenticates a key. The keyring implements it; transports that
// only need to check callers (the REST gateway, the NATS service, a TLS
// front) depend on this, not on the keyring.
type Verifier interface {
	// Verify returns the identity of key, or an UNAUTHENTICATED
	// *apierror.Error (unknown, revoked or malformed key). It never logs or
	// returns the key.
	Verify(ctx context.Context, key string) (*Identity, error)
}

// Store persists key records; *engine.Engine implements it (see
// internal/engine/apikeys.go). Both changes return once durable.
type Store interface {
	APIKeys() (map[string][]byte, error)
	CreateAPIKey(name string, rec []byte) (created bool, err error)
	DeleteAPIKey(name string) (existed bool, err error)
}

// KeyInfo describes a key without the key.
type KeyInfo struct {
	Name    string
	Role    Role
	Types   []string
	Created time.Time
}

// entry is one live key. revoked is set once, by Revoke, and read by every
// Identity made from the entry; gone is cancelled once the revocation is
// durable, for the streams that wait on it (Identity.WithRevocation).
type entry struct {
	rec     *record
	scope   Scope
	revoked atomic.Bool

	gone       context.Context
	cancelGone context.CancelFunc
}

func newEntry(rec *record, scope Scope) *entry {
	e := &entry{rec: rec, scope: scope}
	e.gone, e.cancelGone = context.WithCancel(context.Background())
	return e
}

// revokeForGood marks e revoked and ends the streams waiting on it.
func (e *entry) revokeForGood() {
	e.revoked.Store(true)
	if e.cancelGone != nil {
		e.cancelGone()
	}
}

// keyMap is an immutable index of the live keys, swapped whole on change.
type keyMap struct {
	byHash map[[sha256.Size]byte]*entry
	byName map[string]*entry
}

// Keyring holds the live keys in memory, loaded from a Store at open and
// written through to it on change. Verify is lock-free (it reads an
// immutable map); mu serializes changes, so each change is one
// read-copy-write of the map after the store has made it durable.
type Keyring struct {
	st  Store
	log *slog.Logger

	mu       sync.Mutex // serializes Create, Add and Revoke, and guards onRevoke
	keys     atomic.Pointer[keyMap]
	onRevoke []func(name string)
}

var _ Verifier = (*Keyring)(nil)

// OpenKeyring loads the keys of st. Audit lines (key changes) go to log.
func OpenKeyring(st Store, log *slog.Logger) (*Keyring, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := loadKeys(st, nil)
	if err != nil {
		return nil, err
	}
	k := &Keyring{st: st, log: log}
	k.keys.Store(m)
	return k, nil
}

// loadKeys reads the keys of st; an entry of old whose record is unchanged
// is kept as it is.
func loadKeys(st Store, old *keyMap) (*keyMap, error) {
	raw, err := st.APIKeys()
	if err != nil {
		return nil, err
	}
	m := &keyMap{byHash: map[[sha256.Size]byte]*entry{}, byName: map[string]*entry{}}
	for name, b := range raw {
		rec, err := decodeRecord(b)
		if err != nil {
			return nil, fmt.Errorf("api key %q: %w", name, err)
		}
		if old != nil {
			if e := old.byName[name]; e != nil && slices.Equal(e.rec.encode(), b) {
				m.byHash[rec.hash], m.byName[name] = e, e
				continue
			}
		}
		scope, err := ParseScope(rec.types)
		if err != nil {
			return nil, fmt.Errorf("api key %q: %w", name, err)
		}
		e := newEntry(rec, scope)
		m.byHash[rec.hash] = e
		m.byName[rec.name] = e
	}
	return m, nil
}

// Reload reads the keys from the store again, for keys changed by another
// server sharing it: a key created there is accepted from now on, and one
// revoked there fails new calls at once and open streams at their next
// message, as a local Revoke does (OnRevoke hooks included).
func (k *Keyring) Reload() error {
	k.mu.Lock()
	old := k.keys.Load()
	m, err := loadKeys(k.st, old)
	if err != nil {
		k.mu.Unlock()
		return fmt.Errorf("reload api keys: %w", err)
	}
	var gone []string
	for name, e := range old.byName {
		if m.byName[name] != e {
			e.revokeForGood()
			if m.byName[name] == nil {
				gone = append(gone, name)
			}
		}
	}
	k.keys.Store(m)
	hooks := slices.Clone(k.onRevoke)
	k.mu.Unlock()
	for _, name := range gone {
		k.log.Info("audit: api key revoked by another server", "key", name)
		for _, f := range hooks {
			f(name)
		}
	}
	return nil
}

// Len returns the number of live keys.
func (k *Keyring) Len() int { return len(k.keys.Load().byName) }

// Verify implements Verifier.
func (k *Keyring) Verify(_ context.Context, key string) (*Identity, error) {
	if err := ParseKey(key); err != nil {
		return nil, errBadHeader(err)
	}
	h := Hash(key)
	e := k.keys.Load().byHash[h]
	// The map lookup is keyed by the hash, which tells an attacker nothing
	// about a key; the final comparison of the stored hash is
	// constant-time all the same.
	if e == nil || subtle.ConstantTimeCompare(e.rec.hash[:], h[:]) != 1 || e.revoked.Load() {
		return nil, errUnknownKey()
	}
	return &Identity{Name: e.rec.name, Role: e.rec.role, Scope: e.scope, revoked: &e.revoked, gone: e.gone}, nil
}

// VerifyHeader authenticates an Authorization header value ("Bearer KEY").
func (k *Keyring) VerifyHeader(ctx context.Context, header string) (*Identity, error) {
	return VerifyHeader(ctx, k, header)
}

// VerifyHeader authenticates an Authorization header value with v.
func VerifyHeader(ctx context.Context, v Verifier, header string) (*Identity, error) {
	if header == "" {
		return nil, errNoKey()
	}
	key, err := ParseAuthorization(header)
	if err != nil {
		return nil, errBadHeader(err)
	}
	return v.Verify(ctx, key)
}

// Create makes a new key and returns it; only its hash is kept. by is the
// caller: it names the caller in the audit line, and the new key must lie
// inside its role and scope (Identity.Manages); nil (authentication off)
// may create any key.
func (k *Keyring) Create(by *Identity, name string, role Role, types []string) (string, KeyInfo, error) {
	key, err := GenerateKey()
	if err != nil {
		return "", KeyInfo{}, err
	}
	info, err := k.Add(by, name, key, role, types)
	if err != nil {
		return "", KeyInfo{}, err
	}
	return key, info, nil
}

// Add stores a key the caller chose (the PROTOBASE_ADMIN_KEY bootstrap);
// it must be in the key format. by is as for Create.
func (k *Keyring) Add(by *Identity, name, key string, role Role, types []string) (KeyInfo, error) {
	if !validKeyName(name) {
		return KeyInfo{}, Invalid(fmt.Sprintf("key name %q: want 1 to 64 letters, digits, '.', '_' or '-'", name))
	}
	if role == RoleNone || role > RoleAdmin {
		return KeyInfo{}, Invalid("key role: want read, write, schema or admin")
	}
	if ParseKey(key) != nil {
		return KeyInfo{}, Invalid(ErrKeyFormat.Error())
	}
	scope, err := ParseScope(types)
	if err != nil {
		return KeyInfo{}, Invalid(err.Error())
	}
	if !by.Manages(role, scope) {
		return KeyInfo{}, errCreateDenied(by, role, scope)
	}
	rec := &record{name: name, role: role, types: scope.Types(), hash: Hash(key), created: time.Now().UTC().Truncate(time.Second)}
	k.mu.Lock()
	defer k.mu.Unlock()
	old := k.keys.Load()
	if _, dup := old.byHash[rec.hash]; dup {
		return KeyInfo{}, Invalid("this key is in use by another name")
	}
	created, err := k.st.CreateAPIKey(name, rec.encode())
	if err != nil {
		return KeyInfo{}, err
	}
	if !created {
		return KeyInfo{}, errExists(name)
	}
	e := newEntry(rec, scope)
	m := &keyMap{byHash: maps.Clone(old.byHash), byName: maps.Clone(old.byName)}
	m.byHash[rec.hash] = e
	m.byName[name] = e
	k.keys.Store(m)
	k.log.Info("audit: api key created", "by", by.ActorName(), "key", name, "role", role.String(), "types", rec.types)
	return e.info(), nil
}

// OnRevoke registers f to run after every successful Revoke, with the
// revoked key's name, whichever transport asked for it. It is for state
// that checked the key once and keeps what it let in (a NATS login): such
// state must drop it. f runs outside the keyring's lock.
func (k *Keyring) OnRevoke(f func(name string)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.onRevoke = append(k.onRevoke, f)
}

// Revoke deletes the key name: new calls with it fail at once, and open
// streams at their next message; then the OnRevoke hooks run. by may
// revoke only the keys it manages (Identity.Manages); for any other key
// the answer is the NOT_FOUND of a name that does not exist, so that a
// caller learns nothing about keys outside its view. nil (authentication
// off) may revoke any key.
func (k *Keyring) Revoke(by *Identity, name string) error {
	hooks, err := k.revoke(by, name)
	if err != nil {
		return err
	}
	for _, f := range hooks {
		f(name)
	}
	return nil
}

// revoke does Revoke's work under mu and returns the hooks to run.
func (k *Keyring) revoke(by *Identity, name string) ([]func(string), error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	old := k.keys.Load()
	e := old.byName[name]
	// Checked under mu against the entry about to be deleted, so that a key
	// recreated under the same name in between is judged by its own scope.
	if e == nil || !by.Manages(e.rec.role, e.scope) {
		return nil, errNotFound(name)
	}
	// Refuse in memory first: once the store forgets the key, no call may
	// still pass with it.
	e.revoked.Store(true)
	if _, err := k.st.DeleteAPIKey(name); err != nil {
		e.revoked.Store(false)
		return nil, err
	}
	e.revokeForGood()
	m := &keyMap{byHash: maps.Clone(old.byHash), byName: maps.Clone(old.byName)}
	delete(m.byHash, e.rec.hash)
	delete(m.byName, name)
	k.keys.Store(m)
	k.log.Info("audit: api key revoked", "by", by.ActorName(), "key", name)
	return slices.Clone(k.onRevoke), nil
}

// List returns, by name, the live keys that by manages
// (Identity.Manages); nil (authentication off) lists every key.
func (k *Keyring) List(by *Identity) []KeyInfo {
	m := k.keys.Load()
	out := make([]KeyInfo, 0, len(m.byName))
	for _, name := range slices.Sorted(maps.Keys(m.byName)) {
		if e := m.byName[name]; by.Manages(e.rec.role, e.scope) {
			out = append(out, e.info())
		}
	}
	return out
}

func (e *entry) info() KeyInfo {
	return KeyInfo{Name: e.rec.name, Role: e.rec.role, Types: slices.Clone(e.rec.types), Created: e.rec.created}
}

func validKeyName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		ok := c == '.' || c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}
