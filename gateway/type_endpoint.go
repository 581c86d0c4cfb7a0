package gateway

import (
	"github.com/jobgate/jobgate/internal/egress"
	"github.com/jobgate/jobgate/internal/job"
)

// endpointSummary is an endpoint type's endpoint as GET /v1/types shows
// it to every caller: the URL's scheme and host only, "/…" standing for
// the rest (its path or query may carry a token of the team's), never the signing secret, which the declaration
// does not hold.
type endpointSummary struct {
	URL           string  `json:"url"`
	Concurrency   int     `json:"concurrency"`
	RatePerSecond float64 `json:"rate_per_second,omitempty"`
}

func summarizeEndpoint(d *job.TypeDecl) *endpointSummary {
	if d.Endpoint == nil {
		return nil
	}
	return &endpointSummary{URL: egress.RedactURL(d.Endpoint.URL), Concurrency: d.Endpoint.Concurrency, RatePerSecond: d.Endpoint.RatePerSecond}
}
