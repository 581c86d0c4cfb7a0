// Package canon reads JSON strictly and writes its RFC 8785 canonical form.
// DecodeStrict accepts only what every JSON reader reads the same way (one
// value, no member name twice, bounded depth); Canonicalize gives the one
// byte sequence of a value, so two requests that mean the same params have
// the same fingerprint whatever their key order, white space or number
// spelling. It is a leaf: the standard library and pkg/api's sentinels.
package canon
