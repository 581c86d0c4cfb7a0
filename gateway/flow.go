package gateway

import (
	"strconv"
	"time"

	"github.com/jobgate/jobgate/internal/job"
)

// storeTTL is what a record store that knows its retention offers
// (natsjs.Store).
type storeTTL interface{ TTL() time.Duration }

// scheduleAhead is how far ahead a job may be scheduled here: 30 days, or
// the job retention less an hour when that is shorter. A scheduled job's
// record is written at its admission and next when its run_at comes, so
// its run_at must fall well within the record's retention (the hour is
// for the wake).
func (g *Gateway) scheduleAhead() time.Duration {
	ahead := job.MaxScheduleAhead
	if s, ok := g.jobs.(storeTTL); ok && s.TTL() > 0 {
		ahead = min(ahead, s.TTL()-min(time.Hour, s.TTL()/4))
	}
	return ahead
}

// checkBatchSchedule checks each item's schedule bound (CheckSchedule),
// its errors pointed into the batch body.
func (g *Gateway) checkBatchSchedule(req *job.BatchRequest) error {
	now, ahead := g.cfg.Now(), g.scheduleAhead()
	var fe []job.FieldError
	for i, it := range req.Items {
		err := it.Flow.CheckSchedule(now, ahead)
		if ve, ok := err.(*job.ValidationError); ok {
			for _, e := range ve.Errors {
				e.Field = "/jobs/" + strconv.Itoa(i) + e.Field
				fe = append(fe, e)
			}
		}
		if len(fe) >= 100 {
			break
		}
	}
	if len(fe) > 0 {
		return &job.ValidationError{Errors: fe}
	}
	return nil
}
