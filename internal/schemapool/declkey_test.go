package schemapool

import (
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

func decl(schema string) *job.TypeDecl {
	return &job.TypeDecl{Name: "export", Schema: []byte(schema), TimeoutSeconds: 60, Attempts: 2,
		MaxResultBytes: 1 << 20, ContentType: "text/csv"}
}

// A declaration's key covers its schema's canonical form and its limits,
// not when it was stored, by whom, or a pause.
func TestDeclKey(t *testing.T) {
	t.Parallel()
	d := decl(`{"type":"object","additionalProperties":false}`)
	e := decl(`{ "additionalProperties": false, "type": "object" }`)
	e.Paused, e.DeclaredAt, e.Owner = true, time.Now(), "someone"
	require.Equal(t, DeclKey(d), DeclKey(e))
	e.Attempts++
	require.NotEqual(t, DeclKey(d), DeclKey(e))
	f := decl(`{"type":"object","additionalProperties":true}`)
	require.NotEqual(t, DeclKey(d), DeclKey(f))
}
