package job

// FailedPermanently says whether r failed with a verdict that another
// attempt cannot help (error.retryable false): a handler's permanent
// failure, a result past its type's limit, a panic. An admin retry of such
// a job will likely fail the same way, so it asks for a confirmation.
// exhausted and expired are retryable false too, but they say that the
// attempts or the time ran out, not that the job cannot succeed: a retry
// of those is as ordinary as that of a canceled job.
func (r *Record) FailedPermanently() bool {
	return r.State == StateFailed && r.Error != nil && !r.Error.Retryable &&
		r.Error.Category != CategoryExhausted && r.Error.Category != CategoryExpired
}
