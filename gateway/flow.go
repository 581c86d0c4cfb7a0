package gateway

import (
	"strconv"
	"time"

	"github.com/jobgate/jobgate/internal/job"
)

// scheduleAhead is how far ahead a job may be scheduled: 30 days, the
// contract's bound, whatever the job retention (a scheduled job's record
// is written again every half retention until its run_at: the
// dispatcher's renewals).
func (g *Gateway) scheduleAhead() time.Duration { return job.MaxScheduleAhead }

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
