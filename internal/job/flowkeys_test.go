package job

import (
	"encoding/json"
	"testing"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/stretchr/testify/require"
)

// A params key names the value at its pointer (RFC 6901 escapes, array
// indexes, objects in any key order alike), null when there is none, and
// counts within its tenant; tenant and requester keys are the job's scope.
func TestConcurrencyKeysFollowTheValueAndTheTenant(t *testing.T) {
	t.Parallel()
	rec := func(tenant, requester, params string) *Record {
		return &Record{Tenant: tenant, Requester: requester, Params: json.RawMessage(params)}
	}
	key := func(k string, r *Record) string {
		return ConcurrencyKeyOf("export", api.ConcurrencyKey{Key: k, Limit: 1}, r).Key
	}

	a := key("/params/customer/id", rec("4", "ann", `{"customer":{"id":7,"name":"x"}}`))
	require.Equal(t, a, key("/params/customer/id", rec("4", "bob", `{"customer":{"name":"y","id":7}}`)), "the same value, another requester")
	require.NotEqual(t, a, key("/params/customer/id", rec("4", "ann", `{"customer":{"id":8}}`)), "another value")
	require.NotEqual(t, a, key("/params/customer/id", rec("5", "ann", `{"customer":{"id":7}}`)), "another tenant's alike value")
	require.Equal(t, key("/params/a~1b/0", rec("4", "ann", `{"a/b":["v"]}`)), key("/params/a~1b/0", rec("4", "ann", `{"a/b":["v", "w"]}`)))
	missing := key("/params/customer/id", rec("4", "ann", `{}`))
	require.Equal(t, missing, key("/params/customer/id", rec("4", "ann", `{"customer":{"id":null}}`)), "absent counts as null")
	require.Equal(t, missing, key("/params/customer/id", rec("4", "ann", `{"customer":[1]}`)))

	require.Equal(t, key("tenant", rec("4", "ann", `{}`)), key("tenant", rec("4", "bob", `{"x":1}`)))
	require.NotEqual(t, key("requester", rec("4", "ann", `{}`)), key("requester", rec("4", "bob", `{}`)))
	require.NotEqual(t, key("requester", rec("4", "ann", `{}`)), key("requester", rec("5", "ann", `{}`)))

	d := &TypeDecl{Name: "export", Flow: api.Flow{RateLimit: &api.RateLimit{PerSecond: 1, Key: "tenant"}}}
	k4, k5 := FlowKeys(d, rec("4", "ann", `{}`)), FlowKeys(d, rec("5", "ann", `{}`))
	require.Len(t, k4, 1)
	require.NotEqual(t, k4[0].Key, k5[0].Key, "a rate per tenant")
	require.Nil(t, FlowKeys(&TypeDecl{Name: "plain"}, rec("4", "ann", `{}`)), "no flow control, no keys")
}
