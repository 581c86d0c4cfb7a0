// Package auth mints and verifies jobgate's bearer tokens (HS256 JWTs with
// tenant, sub, exp and an optional admin claim; iss and aud are checked when
// the deployment names them) and manages the generated secret a single-box
// deployment keeps in its data dir.
package auth
