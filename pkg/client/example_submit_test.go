package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/pkg/workertest/jobgatetest"
)

// One logical request makes one job: the same request sent again under
// its key answers the same job (Idempotent-Replayed), and another request
// under that key is a conflict. The jobgate here is a whole one in this
// process (pkg/workertest/jobgatetest), as an application's own test
// would start it; the application itself points New at its gateway's URL.
func ExampleClient_Submit() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jg, err := jobgatetest.NewDeployment(ctx)
	if err != nil {
		panic(err)
	}
	defer jg.Stop(context.Background())
	token, err := jg.Token("4", "reviewer-47")
	if err != nil {
		panic(err)
	}

	c, err := client.New(jg.URL(), token, client.WithoutJournal())
	if err != nil {
		panic(err)
	}
	key := client.NewKey() // kept with the request, e.g. in a hidden form field
	report := map[string]any{"case_id": 47, "revision": 29, "pages": 2}
	first, err := c.Submit(ctx, "permit_report", report, client.WithKey(key))
	if err != nil {
		panic(err)
	}
	again, err := c.Submit(ctx, "permit_report", report, client.WithKey(key)) // a double click
	if err != nil {
		panic(err)
	}
	fmt.Println("replayed:", again.Replayed, "same job:", again.Job.ID == first.Job.ID)

	report["revision"] = 30
	_, err = c.Submit(ctx, "permit_report", report, client.WithKey(key))
	var conflict *client.ConflictError
	fmt.Println("another request under the key:", errors.As(err, &conflict))

	done, err := c.Wait(ctx, first.Job.ID, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(done.State, done.Result.ContentType)
	// Output:
	// replayed: true same job: true
	// another request under the key: true
	// succeeded application/pdf
}
