package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/client"
)

// Retry every permit report that failed with a render error, with a tenant
// admin's token: count them first, then retry them a call at a time, each
// call going on from the previous one's cursor. The key is kept across the
// calls and their attempts, so running the program again after a crash
// makes no job twice.
func ExampleAdmin() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("JOBGATE_ADMIN_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	admin := c.Admin()
	filter := api.AdminBulkRequest{Type: "permit_report", State: api.StateFailed, Category: "render_error"}

	preview := filter
	preview.DryRun = true
	n, err := admin.BulkRetry(ctx, preview)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d failed reports would be retried\n", n.Result.Retried)

	key := os.Getenv("RETRY_KEY") // the key of an earlier, interrupted run
	if key == "" {
		key = client.NewKey()
	}
	for {
		out, err := admin.BulkRetry(ctx, filter, client.WithKey(key))
		var nc *client.NotConfirmedError
		switch {
		case errors.As(err, &nc):
			log.Fatalf("no answer; run again with RETRY_KEY set to the key you kept: %v", err)
		case err != nil:
			log.Fatal(err)
		}
		r := out.Result
		fmt.Printf("retried %d, already retried %d, skipped %d, failed %d\n", r.Retried, r.Replayed, r.Skipped, r.Failed)
		if r.NextCursor == "" {
			break
		}
		filter.Cursor = r.NextCursor
	}

	page, err := admin.List(ctx, api.AdminJobFilter{Type: "permit_report", State: api.StateQueued, Limit: 10})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range page.Jobs {
		fmt.Println(j.ID, j.Requester, "retry of", j.RetryOf)
	}
}
