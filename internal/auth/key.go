package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// KeyPrefix starts every API key, so that a leaked key is recognisable
// (secret scanners, logs) and a wrong value fails fast.
const KeyPrefix = "pb_"

const (
	keyEntropyBytes = 24 // 192 bits
	// KeyLen is the length of a key: the prefix and the base64url
	// (unpadded) encoding of the random bytes.
	KeyLen = len(KeyPrefix) + (keyEntropyBytes*8+5)/6
)

// ErrKeyFormat is returned for a string that is not an API key.
var ErrKeyFormat = errors.New("not a Protobase API key (want pb_ and 32 base64url characters)")

// GenerateKey returns a new random key.
func GenerateKey() (string, error) {
	var b [keyEntropyBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// ParseKey checks that s is a well-formed key: the prefix, then exactly the
// canonical unpadded base64url encoding of 24 bytes.
func ParseKey(s string) error {
	if len(s) != KeyLen || !strings.HasPrefix(s, KeyPrefix) {
		return ErrKeyFormat
	}
	// The decoder skips '\r' and '\n': check the alphabet first.
	for _, c := range []byte(s[len(KeyPrefix):]) {
		if !isKeyChar(c) {
			return ErrKeyFormat
		}
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s[len(KeyPrefix):])
	if err != nil || len(b) != keyEntropyBytes {
		return ErrKeyFormat
	}
	return nil
}

// Hash is the stored form of a key.
func Hash(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }

// maxHeaderLen bounds the Authorization value looked at: a key is short,
// and a huge header should not be copied or hashed.
const maxHeaderLen = 256

// ParseAuthorization extracts the key from an Authorization header value
// ("Bearer KEY"; the scheme is case-insensitive, surrounding blanks are
// ignored) and checks its format. The key is never part of an error.
func ParseAuthorization(v string) (string, error) {
	if v == "" {
		return "", errors.New("no API key: send the header authorization: Bearer KEY")
	}
	if len(v) > maxHeaderLen {
		return "", errors.New("authorization header is too long")
	}
	v = strings.TrimSpace(v)
	scheme, rest, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errors.New("authorization header: want the Bearer scheme (authorization: Bearer KEY)")
	}
	key := strings.TrimLeft(rest, " \t")
	if err := ParseKey(key); err != nil {
		return "", fmt.Errorf("authorization header: %w", err)
	}
	return key, nil
}

// isKeyChar reports whether c is in the base64url alphabet.
func isKeyChar(c byte) bool {
	return c == '-' || c == '_' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}
