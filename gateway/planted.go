package gateway

import (
	"context"
	"errors"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// admitUnchecked is the planted bug of failpoint.GatewayAdmitUnchecked,
// for the chaos checker's test only: it admits as if the key's read had
// come from a replica that had not seen its create, writing the new record
// over the stored one instead of replaying it. Every client is then told
// 202 for a key that already had its job.
func (g *Gateway) admitUnchecked(ctx context.Context, a admission, rec *job.Record) (*job.Record, bool, error) {
	err := g.jobs.Create(ctx, rec)
	if errors.Is(err, natsjs.ErrExists) {
		var stored *job.Record
		stored, err = g.jobs.Mutate(ctx, a.storeKey, func(r *job.Record) error {
			rev := r.Revision
			*r = *rec.Clone()
			r.Revision = rev
			return nil
		})
		if err == nil {
			rec = stored
		}
	}
	if err != nil {
		return nil, false, err
	}
	g.seen.add(a.storeKey, a.proof)
	return rec, true, nil
}
