package job

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// The key hash that logs and records carry must not give a guessable key
// away: it is keyed by the deployment secret, unlike a plain digest.
func TestKeyHashIsKeyedBySecret(t *testing.T) {
	t.Parallel()
	a := NewIDDeriver([]byte("secret-a"))
	b := NewIDDeriver([]byte("secret-b"))
	const key = "r-63817"
	plain := sha256.Sum256([]byte(key))

	ha := a.KeyHash("4", "reviewer-47", key)
	if len(ha) != 16 {
		t.Fatalf("key hash %q: want 16 hex characters", ha)
	}
	if _, err := hex.DecodeString(ha); err != nil {
		t.Fatalf("key hash %q is not hex: %v", ha, err)
	}
	if ha != a.KeyHash("4", "reviewer-47", key) {
		t.Fatal("key hash is not stable under one secret")
	}
	if hb := b.KeyHash("4", "reviewer-47", key); hb == ha {
		t.Fatalf("two secrets give the same key hash %s", ha)
	}
	if ha == hex.EncodeToString(plain[:8]) || ha == HashKey(key) {
		t.Fatal("key hash is the plain SHA-256 prefix, recoverable by guessing")
	}
	if ha == a.KeyHash("4", "reviewer-48", key) || ha == a.KeyHash("5", "reviewer-47", key) {
		t.Fatal("key hash ignores the key's scope")
	}
	id := a.Derive("4", "reviewer-47", key)
	if ha == id[4:20] {
		t.Fatal("key hash is a piece of the job id")
	}
}

func TestIDDeriverMatchesDeriveID(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef")
	d := NewIDDeriver(secret)
	for _, c := range [][3]string{{"4", "reviewer-47", "r-63"}, {"t", "r", ""}, {"a", "b", string(make([]byte, 255))}} {
		require.Equal(t, DeriveID(secret, c[0], c[1], c[2]), d.Derive(c[0], c[1], c[2]))
		require.Equal(t, DeriveID(secret, c[0], c[1], c[2]), d.Derive(c[0], c[1], c[2]), "again, from the pool")
	}
}

func BenchmarkDeriveID(b *testing.B) {
	d := NewIDDeriver([]byte("0123456789abcdef"))
	b.ReportAllocs()
	for b.Loop() {
		d.Derive("4", "reviewer-47", "r-63")
	}
}
