package jobtest

import "github.com/jobgate/jobgate/internal/childproc"

// SyncBuffer is a bytes.Buffer safe for concurrent writes (a child
// process's output, a logger's) and the test's reads.
type SyncBuffer = childproc.Buffer
