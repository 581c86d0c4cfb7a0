package api

import (
	"regexp"
	"strings"
)

var jobIDPattern = regexp.MustCompile(`^job_[a-z2-7]{26}$`)

// ValidID reports whether s has the shape of a job id.
func ValidID(s string) bool { return jobIDPattern.MatchString(s) }

// MaxKeyLen bounds an Idempotency-Key.
const MaxKeyLen = 255

// ValidKey checks an Idempotency-Key value: 1–255 printable ASCII characters.
func ValidKey(key string) bool {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return false
	}
	return !strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r > 0x7e })
}
