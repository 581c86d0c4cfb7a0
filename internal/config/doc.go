// Package config holds jobgate's settings: one documented struct with working
// defaults, loaded from a YAML file, then overridden by JOBGATE_* environment
// variables, then by command-line flags, and checked by Validate.
package config
