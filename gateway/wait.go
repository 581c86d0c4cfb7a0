package gateway

import (
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/job"
)

// waitParam reads a long-poll's ?wait= (GET /v1/jobs/{id}, GET
// /v1/batches/{id}): a Go duration, at most the server's cap once used. A
// bare number is the likeliest slip (?wait=10, as many APIs take seconds):
// its answer says that a unit is needed rather than only what a duration
// looks like.
func waitParam(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && d >= 0 {
		return d, nil
	}
	if strings.Trim(s, "0123456789.") == "" {
		return 0, job.Userf(errBadQuery, "wait needs a unit: %.10ss, not %.10s (a duration such as 20s)", s, s)
	}
	return 0, job.Userf(errBadQuery, "wait must be a duration with a unit, like 20s")
}
