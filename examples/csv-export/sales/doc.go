// Package sales is the export behind the csv-export example: params of an
// export_sales_report job, their checks, and a streamed CSV of synthetic
// sales (seeded per region and day; the example has no database) that
// holds one row in memory at a time. It knows nothing of jobgate; the
// example's main package turns it into a job type with pkg/worker.
package sales
