package api

import (
	"encoding/json"
	"time"
)

// Batch bounds and choices (docs/api.md, "Batches").
const (
	// MaxBatchItems is the most jobs one POST /v1/batches holds.
	MaxBatchItems = 1000
	// NotifyBatch: one notice (webhook batch.completed, at most one mail)
	// once every job of the batch has ended, none per job. The default.
	NotifyBatch = "batch"
	// NotifyEach: every job of the batch notified as any job is.
	NotifyEach = "each"
)

// BatchItem is one job of a POST /v1/batches body.
type BatchItem struct {
	Type   string          `json:"type"`
	Params json.RawMessage `json:"params"`
	// The item's flow fields, all optional (docs/api.md, "Flow fields"):
	// RunAt or Delay (a Go duration, "90s"), Priority 1–5, StartBy.
	RunAt    *time.Time `json:"run_at,omitempty"`
	Delay    string     `json:"delay,omitempty"`
	Priority int        `json:"priority,omitempty"`
	StartBy  *time.Time `json:"start_by,omitempty"`
}

// BatchRequest is the body of POST /v1/batches.
type BatchRequest struct {
	Jobs   []BatchItem `json:"jobs"`
	Notify string      `json:"notify,omitempty"`
}

// BatchCounts are a batch's jobs per state.
type BatchCounts struct {
	Scheduled int `json:"scheduled"` // waiting for their run_at
	Queued    int `json:"queued"`
	Running   int `json:"running"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Canceled  int `json:"canceled"`
}

// BatchJob is one job of a batch and its state.
type BatchJob struct {
	ID    string `json:"id"`
	State State  `json:"state"`
}

// BatchLinks are the paths a client follows from a batch.
type BatchLinks struct {
	Self   string `json:"self"`
	Events string `json:"events"`
}

// Batch is the batch resource (GET /v1/batches/{id}): Jobs is one page of
// its jobs, in item order (absent in events); NextCursor the next page's.
type Batch struct {
	ID         string      `json:"id"`
	CreatedAt  time.Time   `json:"created_at"`
	Done       bool        `json:"done"`
	Total      int         `json:"total"`
	Notify     string      `json:"notify,omitempty"`
	Counts     BatchCounts `json:"counts"`
	Progress   Progress    `json:"progress"`
	Jobs       []BatchJob  `json:"jobs,omitempty"`
	NextCursor string      `json:"next_cursor,omitempty"`
	Links      BatchLinks  `json:"links"`
}
