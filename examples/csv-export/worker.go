package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/examples/csv-export/sales"
	"github.com/jobgate/jobgate/pkg/worker"
)

// exportType declares export_sales_report: its params schema, limits and
// handler.
func exportType() worker.Type[sales.Params] {
	return worker.Type[sales.Params]{
		Name:           sales.TypeName,
		Description:    sales.Description,
		Schema:         sales.Schema,
		Timeout:        5 * time.Minute,
		Attempts:       3,
		MaxResultBytes: sales.MaxResultBytes,
		ContentType:    sales.ContentType,
		Concurrency:    2,
		Work:           export,
	}
}

// export streams the CSV into the job's result. Params the schema allows
// but no export can serve (to before from, an unknown product) fail at once
// without a retry; an error while writing (the connection to the result
// store, cancellation, the attempt's time budget) is the package's to
// classify and retry.
func export(ctx context.Context, j *worker.Job[sales.Params]) error {
	e, err := sales.New(j.Params)
	if err != nil {
		return worker.Permanent(err)
	}
	total := int(e.Rows())
	j.Progress(0, total, "rows")
	rows, err := e.Write(ctx, j.Output(), func(done int64) { j.Progress(int(done), total, "rows") })
	if err != nil {
		return fmt.Errorf("export stopped after %d of %d rows: %w", rows, total, err)
	}
	j.Logger().Info("export written", "rows", rows, "days", e.Days())
	return nil
}
