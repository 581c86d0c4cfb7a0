package natsjs

import (
	"context"
	"fmt"
)

// StorageUse is what one budgeted resource stores against its byte budget.
type StorageUse struct {
	Resource string // bucket or stream name, as users know it
	Bytes    int64
	MaxBytes int64 // 0: no budget (a resource an earlier version created)
}

// budgeted are the resources whose room admission depends on: an admitted
// job writes its record, work, events, notices, deliveries and result.
var budgeted = []struct{ name, stream string }{
	{BucketJobs, "KV_" + BucketJobs}, {StreamWork, StreamWork}, {StreamEvents, StreamEvents},
	{BucketNotices, "KV_" + BucketNotices}, {StreamDeliveries, StreamDeliveries},
	{BucketResults, "OBJ_" + BucketResults},
}

// StorageUse reads the bytes stored and the budget of each resource an
// admission depends on: one stream info request each.
func (r *Resources) StorageUse(ctx context.Context) ([]StorageUse, error) {
	out := make([]StorageUse, 0, len(budgeted))
	for _, b := range budgeted {
		s, err := r.JS.Stream(ctx, b.stream)
		if err != nil {
			return nil, fmt.Errorf("storage use of %s: %w", b.name, mapErr(err))
		}
		info, err := s.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("storage use of %s: %w", b.name, mapErr(err))
		}
		out = append(out, StorageUse{Resource: b.name, Bytes: int64(info.State.Bytes), MaxBytes: max(info.Config.MaxBytes, 0)})
	}
	return out, nil
}
