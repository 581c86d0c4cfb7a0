package bench

import "time"

// The bench talks to its target process over the target's standard input
// and output, one JSON object per line: the target first writes a Ready, then
// answers each Request with one Response.

// Ready is the target's first line.
type Ready struct {
	URL string `json:"url"` // gateway base URL, e.g. http://127.0.0.1:40123
	PID int    `json:"pid"`
}

// Request ops.
const (
	opFloor        = "floor"         // run the raw JetStream floor in-process
	opDrive        = "drive"         // start advancing jobs like a renderer would
	opDriveStop    = "drive-stop"    // stop the driver, report its changes
	opMem          = "mem"           // memory and stream counts
	opProfileStart = "profile-start" // start a CPU profile into Path
	opProfileStop  = "profile-stop"
	opHeapProfile  = "heap-profile" // write the heap profile to Path
	opTraceStart   = "trace-start"  // start a runtime/trace execution trace into Path
	opTraceStop    = "trace-stop"
	opRawPipe      = "raw-pipe"   // run the raw JetStream pipeline in-process
	opPipeStats    = "pipe-stats" // counters of finished jobs and NATS traffic
	opNoopWaits    = "noop-waits" // queued → claimed waits of bench_noop jobs since the last call
	// opGCPercent sets the target's GOGC (Percent, -1: off) and answers the
	// previous value in Percent; going back to a value ≥ 0 collects at once.
	opGCPercent = "gc-percent"
	// opNoticeEvents publishes job events (Keys are job ids of Tenant,
	// requester Path; Pages 3: queued, running, succeeded, else succeeded).
	opNoticeEvents = "notice-events"
	// opEndpointDone answers the endpoint jobs of Tenant that succeeded
	// since the last call: their number in Changes, admission → succeeded
	// of each in Waits (endpoints_target.go).
	opEndpointDone = "endpoint-done"
)

// Request is one command to the target.
type Request struct {
	Op       string        `json:"op"`
	Clients  int           `json:"clients,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	Tenant   string        `json:"tenant,omitempty"`
	Keys     []string      `json:"keys,omitempty"`
	Interval time.Duration `json:"interval,omitempty"`
	Pages    int           `json:"pages,omitempty"`
	Path     string        `json:"path,omitempty"`
	Workers  int           `json:"workers,omitempty"`
	Round    int           `json:"round,omitempty"`
	Percent  int           `json:"percent,omitempty"`
	// Events makes the change driver (opDrive) publish each change's event
	// too, as a renderer's writes do, for the watchers of event streams.
	Events bool `json:"events,omitempty"`
}

// Response answers one Request.
type Response struct {
	Err     string          `json:"err,omitempty"`
	Floor   *Samples        `json:"floor,omitempty"`
	Mem     *MemInfo        `json:"mem,omitempty"`
	Changes int64           `json:"changes,omitempty"`
	Pipe    *PipeResult     `json:"pipe,omitempty"`
	Stats   *PipeStats      `json:"stats,omitempty"`
	Waits   []time.Duration `json:"waits_ns,omitempty"`
	Percent int             `json:"percent,omitempty"`
}

// MemInfo is the target's memory as its Go runtime sees it.
type MemInfo struct {
	HeapInuse  uint64 `json:"heap_inuse"`
	HeapSys    uint64 `json:"heap_sys"`
	HeapIdle   uint64 `json:"heap_idle"`     // spans holding nothing, kept or released
	Released   uint64 `json:"heap_released"` // of those, given back to the OS
	StackInuse uint64 `json:"stack_inuse"`
	Sys        uint64 `json:"sys"`
	NumGC      uint32 `json:"num_gc"`
	Goroutines int    `json:"goroutines"`
	SSEStreams int64  `json:"sse_streams"`
}
