// Package auth owns API keys and what they allow: the key format and its
// parsing, the Authorization header, roles and per-type scopes, the
// in-memory keyring that verifies keys, and the rules that say which role
// each RPC needs. Transports authenticate a caller once per call or stream
// (Keyring.VerifyHeader), carry the Identity in the context (NewContext),
// and ask Require / Identity.AllowsType before touching the engine.
//
// # Keys
//
// A key is "pb_" followed by 32 base64url characters: 192 bits from
// crypto/rand. Only its SHA-256 hash is stored (in the engine's own key
// space, see engine.APIKeys), so a copy of the data directory does not give
// away working keys. Keys are high-entropy, so a fast hash is enough: no
// password-style stretching is needed. A presented key is hashed once,
// looked up by its hash, and compared with crypto/subtle.
//
// # Roles and scope
//
// Roles are ordered: read < write < schema < admin, each allowing what the
// ones below allow (see MethodRole for the RPC table). A scope limits a key
// to record types by full name ("shop.User") or package wildcard ("shop.*",
// every type whose full name starts with "shop."); an empty scope allows
// every type. A key creates, lists and revokes only keys whose role is no
// higher than its own and whose scope lies inside its own
// (Identity.Manages, Scope.Contains), so that a scoped admin key cannot
// make an unscoped one.
//
// # Revocation
//
// Revoke removes a key from the keyring and flags the in-memory entry that
// every Identity made from it points to. Streams check the flag (one atomic
// load) at each message, so an open stream ends at its next message without
// hashing again.
package auth
