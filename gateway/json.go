package gateway

import (
	"encoding/json"

	"github.com/jobgate/jobgate/internal/codec"
	"github.com/jobgate/jobgate/internal/job"
)

// jsonMarshal is the one encoder of response bodies, so a faster one can be
// swapped in at a single place. Job resources, the body of every admission
// and status read, take the hand-built encoder (same bytes, no reflection).
func jsonMarshal(v any) ([]byte, error) {
	if r, ok := v.(*job.Resource); ok {
		return codec.AppendResource(make([]byte, 0, 768), r), nil
	}
	return json.Marshal(v)
}
