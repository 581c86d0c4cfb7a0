package codec

import (
	"encoding/json"
	"fmt"

	"github.com/jobgate/jobgate/internal/job"
)

// MarshalRecord encodes r for storage (the bytes encoding/json would
// write, built without reflection: see encode.go).
func MarshalRecord(r *job.Record) ([]byte, error) {
	if len(r.Params) > 0 && !json.Valid(r.Params) {
		return nil, fmt.Errorf("job %s: params are not valid JSON", r.ID)
	}
	return AppendRecord(make([]byte, 0, 512), r), nil
}

// UnmarshalRecord decodes a stored record and attaches its revision.
func UnmarshalRecord(data []byte, revision uint64) (*job.Record, error) {
	var r job.Record
	if !fastUnmarshal(&r, data) { // records this version wrote take the fast path
		r = job.Record{}
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, err
		}
	}
	r.Revision = revision
	return &r, nil
}
