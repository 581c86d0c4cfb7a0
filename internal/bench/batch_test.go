package bench

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The batch section's body is a valid batch: n permit reports of one case,
// revisions 1..n, as the reviewer's page sends them.
func TestBatchBody(t *testing.T) {
	var b struct {
		Jobs []struct {
			Type   string `json:"type"`
			Params struct {
				CaseID   int `json:"case_id"`
				Revision int `json:"revision"`
				Pages    int `json:"pages"`
			} `json:"params"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(batchBody(batchItems, 47, 63), &b))
	require.Len(t, b.Jobs, batchItems)
	for i, j := range b.Jobs {
		require.Equal(t, "permit_report", j.Type)
		require.Equal(t, 47, j.Params.CaseID)
		require.Equal(t, i+1, j.Params.Revision)
		require.Equal(t, 63, j.Params.Pages)
	}
}
