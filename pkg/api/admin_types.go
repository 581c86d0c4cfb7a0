package api

import "time"

// The operator's job type and worker endpoints of the admin API:
// POST /v1/admin/types/{name}/pause and /resume, DELETE
// /v1/admin/types/{name}, GET /v1/admin/workers.

// AdminTypeState answers a pause or a resume: the type and whether it is
// paused now (its jobs are admitted and wait queued; none starts).
type AdminTypeState struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
}

// AdminWorker is one live worker process of GET /v1/admin/workers: the
// credential it signed in with (its id, as `jobgate nats-user --worker
// --json` prints it; "jobgate" for jobgate's own), the name it gave
// itself, the types it runs, its slots and busy slots over them, and its
// last sign of life (its latest hello).
type AdminWorker struct {
	Credential string            `json:"credential"`
	Worker     string            `json:"worker"`
	Types      []AdminWorkerType `json:"types"`
	Slots      int               `json:"slots"`
	// Busy is nil when a type's worker does not say (an older worker).
	Busy      *int      `json:"busy"`
	StartedAt time.Time `json:"started_at"`
	SeenAt    time.Time `json:"seen_at"`
}

// AdminWorkerType is one type a worker process runs.
type AdminWorkerType struct {
	Type   string    `json:"type"`
	Slots  int       `json:"slots"`
	Busy   *int      `json:"busy"`
	SeenAt time.Time `json:"seen_at"`
}

// AdminWorkerPage is a page of GET /v1/admin/workers, by credential, then
// worker name.
type AdminWorkerPage struct {
	Workers    []AdminWorker `json:"workers"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// Limits of GET /v1/admin/workers.
const (
	DefaultWorkerPage = 100
	MaxWorkerPage     = 500
)
