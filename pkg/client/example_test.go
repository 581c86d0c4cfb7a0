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

// Submit a report, follow it, save the PDF. Run the program again after a
// crash and the journaled key brings back the same job instead of a second
// one.
func Example() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("JOBGATE_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	sub, err := c.Submit(ctx, "permit_report", map[string]any{"case_id": 47, "revision": 29, "pages": 63})
	var ve *client.ValidationError
	switch {
	case errors.As(err, &ve):
		log.Fatalf("fix the request: %v", ve.Errors)
	case errors.Is(err, client.ErrNotConfirmed):
		log.Fatalf("server unreachable; run again to resume: %v", err)
	case err != nil:
		log.Fatal(err)
	}
	res, err := c.Wait(ctx, sub.Job.ID, func(r *api.Resource) {
		if r.Progress != nil {
			fmt.Printf("%s %d/%d\n", r.State, r.Progress.Done, r.Progress.Total)
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	if res.State != api.StateSucceeded {
		log.Fatalf("job %s", res.State)
	}
	f, err := os.Create("report.pdf")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := c.Download(ctx, res.ID, f); err != nil {
		log.Fatal(err)
	}
}
