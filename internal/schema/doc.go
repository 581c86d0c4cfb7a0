// Package schema compiles the JSON Schemas (draft 2020-12) that workers
// declare for their job types' params and applies them to submissions: it
// fills in defaults, validates, and reports each problem as a job.FieldError
// whose field is a JSON pointer into the request body. Compile accepts only
// self-contained schemas (nothing is ever loaded from a URL or a file) that
// bound every string, array and object a client can send, so a declared
// type cannot make the gateway hold or check unbounded input, and whose
// validation is bounded: Compile refuses schemas where one value costs more
// than MaxNodesPerPosition subschema visits, $ref cycles and absurd values,
// and Apply refuses, as a validation error, params that would cost more
// than MaxValidationCost (cost.go). Generate
// derives such a schema from a Go struct, and Registry is the live,
// concurrency-safe set of compiled schemas the gateway decodes against.
package schema
