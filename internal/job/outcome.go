package job

import "fmt"

// WorkerLost is the verdict recorded for an attempt whose worker vanished
// without reaching one of its own.
func WorkerLost(r *Record) *Failure {
	return &Failure{Category: CategoryWorkerLost, Retryable: true,
		Message: fmt.Sprintf("attempt %d stopped answering: its worker vanished", r.Attempt)}
}

// FinalFailure is the error of a job that fails because its attempts (or
// the deliveries of its work) ran out: worker_lost when the last attempt's
// worker vanished mid-attempt (the record still names a worker), else the
// last attempt's own cause, and exhausted only where no attempt reached a
// verdict.
func FinalFailure(r *Record, maxAttempts int) *Failure {
	switch {
	case r.State == StateRunning && r.Worker != "":
		return WorkerLost(r)
	case r.Error != nil:
		f := *r.Error
		f.Message = fmt.Sprintf("%s (attempt %d of %d)", f.Message, r.AttemptsUsed(), maxAttempts)
		return &f
	}
	return &Failure{Category: CategoryExhausted,
		Message: fmt.Sprintf("the job was not rendered: its work ran out of deliveries after %d of %d attempts", r.AttemptsUsed(), maxAttempts)}
}
