package client_test

import (
	"testing"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

func TestFingerprintIsCanonicalForAnyType(t *testing.T) {
	t.Parallel()
	// Any type, not only the ones this SDK was built with.
	a := client.Fingerprint([]byte(`{"type":"invoice_pdf","params":{"customer":"ACME","lines":[{"qty":2,"sku":"x"}]}}`))
	b := client.Fingerprint([]byte(`{ "params": {"lines":[{"sku":"x","qty":2.0}], "customer":"\u0041CME"}, "type":"invoice_pdf" }`))
	require.Equal(t, a, b)
	require.Len(t, a, 64)
	require.NotEqual(t, a, client.Fingerprint([]byte(`{"type":"invoice_pdf","params":{"customer":"ACME","lines":[{"qty":3,"sku":"x"}]}}`)))

	// With every param spelled out it is the server's fingerprint.
	body := []byte(`{"type":"permit_report","params":{"pages":63,"case_id":47,"revision":29}}`)
	server, err := job.DecodeSubmission(body, jobtest.PermitTypes(t))
	require.NoError(t, err)
	require.Equal(t, server.Fingerprint, client.Fingerprint(body))

	// No canonical form: a digest of the bytes, still stable.
	raw := []byte(`{"type":"x","params":{"n":12345678901234567890}}`)
	require.Equal(t, client.Fingerprint(raw), client.Fingerprint(raw))
	require.Contains(t, client.Fingerprint(raw), "raw:")
}
