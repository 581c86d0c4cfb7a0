package jobtest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/schema"
	"github.com/stretchr/testify/require"
)

// PermitReport is permit_report's declaration as jobgate's renderer makes
// it (the renderer's tests hold the two equal): tests of the other services,
// which run no renderer, declare it with DeclareTypes as a worker would.
func PermitReport() *job.TypeDecl {
	return &job.TypeDecl{
		Name:        "permit_report",
		Description: "A permit report: the inspection items of a case at a revision, as a PDF of the pages asked for.",
		Schema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "permit_report params",
  "type": "object",
  "additionalProperties": false,
  "required": ["case_id", "revision"],
  "properties": {
    "case_id": {"type": "integer", "minimum": 1, "maximum": 9007199254740991, "description": "the permit case"},
    "revision": {"type": "integer", "minimum": 1, "maximum": 9007199254740991, "description": "the case revision to report on"},
    "pages": {"type": "integer", "minimum": 1, "maximum": 2000, "default": 10, "description": "pages of the report"}
  }
}`),
		TimeoutSeconds: 120, Attempts: 3, MaxResultBytes: 64 << 20, ContentType: "application/pdf",
	}
}

// DeclareTypes stores declarations as workers do on start (default:
// permit_report).
func DeclareTypes(t testing.TB, res *natsjs.Resources, decls ...*job.TypeDecl) {
	t.Helper()
	if len(decls) == 0 {
		decls = []*job.TypeDecl{PermitReport()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, d := range decls {
		d.DeclaredAt = time.Now().UTC()
		require.NoError(t, res.Types.Declare(ctx, d))
	}
}

// PermitTypes is a schema.Types holding permit_report's schema, to decode
// submissions exactly as a gateway with the renderer running does.
func PermitTypes(t testing.TB) schema.Types {
	t.Helper()
	s, err := schema.Compile(PermitReport().Schema)
	require.NoError(t, err)
	reg := schema.NewRegistry()
	reg.Set("permit_report", s)
	return reg
}
