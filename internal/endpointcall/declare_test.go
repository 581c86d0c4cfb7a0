package endpointcall_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/endpoint"
	"github.com/stretchr/testify/require"
)

func TestPutDeclaresAnEndpointTypeOnceAndShowsItsSecretOnlyThen(t *testing.T) {
	t.Parallel()
	d := start(t)
	url := "http://127.0.0.1:9/hooks/thumbnail?token=team-secret"
	secret := d.declare(t, "thumbnail", url, nil)

	body := map[string]any{
		"description": "test type", "schema": json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":100}},"additionalProperties":false}`),
		"timeout_seconds": 5, "attempts": 3, "max_result_bytes": 1024, "content_type": "text/plain",
		"endpoint": map[string]any{"url": url, "concurrency": 4},
	}
	status, data, _ := d.do(t, d.operator, http.MethodPut, "/v1/admin/types/thumbnail", body)
	require.Equal(t, http.StatusOK, status, string(data))
	require.NotContains(t, string(data), "whsec_", "the secret is shown at the creation only")
	var again struct {
		DeclaredAt time.Time `json:"declared_at"`
		Endpoint   struct {
			URL         string `json:"url"`
			Concurrency int    `json:"concurrency"`
		} `json:"endpoint"`
	}
	require.NoError(t, json.Unmarshal(data, &again))
	require.Equal(t, url, again.Endpoint.URL, "the operator sees the whole URL")
	require.False(t, again.DeclaredAt.IsZero())

	// The same body again changes nothing: not even the declaration's date.
	status, data2, _ := d.do(t, d.operator, http.MethodPut, "/v1/admin/types/thumbnail", body)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, string(data), string(data2))

	body["endpoint"] = map[string]any{"url": url, "concurrency": 7, "rate_per_second": 50}
	status, data, _ = d.do(t, d.operator, http.MethodPut, "/v1/admin/types/thumbnail", body)
	require.Equal(t, http.StatusOK, status, string(data))
	require.Contains(t, string(data), `"concurrency":7`)

	// Every caller sees the type, its endpoint's host only, never the secret.
	require.Eventually(t, func() bool {
		status, data, _ := d.do(t, d.user, http.MethodGet, "/v1/types/thumbnail", nil)
		return status == http.StatusOK && strings.Contains(string(data), `"concurrency":7`)
	}, 10*time.Second, 20*time.Millisecond)
	for _, path := range []string{"/v1/types/thumbnail", "/v1/types"} {
		status, data, _ := d.do(t, d.user, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, string(data), `"url":"http://127.0.0.1:9/…"`, path)
		require.NotContains(t, string(data), "team-secret", path)
		require.NotContains(t, string(data), strings.TrimPrefix(secret, "whsec_"), path)
	}

	// A tenant's token may not declare.
	status, _, _ = d.do(t, d.user, http.MethodPut, "/v1/admin/types/thumbnail", body)
	require.Equal(t, http.StatusForbidden, status)

	// The declaration survives a restart.
	d.stop(t)
	d2 := startOn(t, d.dataDir)
	require.Eventually(t, func() bool {
		status, data, _ := d2.do(t, d2.user, http.MethodGet, "/v1/types/thumbnail", nil)
		return status == http.StatusOK && strings.Contains(string(data), `"concurrency":7`)
	}, 10*time.Second, 20*time.Millisecond)
}

func TestPutRefusesABadDeclarationNamingEachField(t *testing.T) {
	t.Parallel()
	d := start(t)
	status, data, _ := d.do(t, d.operator, http.MethodPut, "/v1/admin/types/bad_one", map[string]any{
		"schema":          json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"}}}`),
		"timeout_seconds": 0.5, "attempts": 99, "content_type": "text",
		"endpoint": map[string]any{"url": "http://10.1.2.3/x", "concurrency": 5000, "colour": "red"},
		"extra":    true,
	})
	require.Equal(t, http.StatusUnprocessableEntity, status, string(data))
	var p struct {
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(data, &p))
	var fields []string
	for _, e := range p.Errors {
		fields = append(fields, e.Field)
	}
	// The JSON type error stops the decode: one pointer for it.
	require.Contains(t, fields, "/timeout_seconds", string(data))

	status, data, _ = d.do(t, d.operator, http.MethodPut, "/v1/admin/types/bad_one", map[string]any{
		"schema":   json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"}}}`),
		"attempts": 99, "content_type": "text",
		"endpoint": map[string]any{"url": "http://10.1.2.3/x", "concurrency": 5000, "colour": "red"},
		"extra":    true,
	})
	require.Equal(t, http.StatusUnprocessableEntity, status, string(data))
	require.NoError(t, json.Unmarshal(data, &p))
	fields = nil
	for _, e := range p.Errors {
		fields = append(fields, e.Field)
	}
	require.ElementsMatch(t, []string{"/extra", "/endpoint/colour", "/schema", "/attempts", "/content_type",
		"/endpoint/concurrency", "/endpoint/url"}, fields, string(data))

	status, data, _ = d.do(t, d.operator, http.MethodPut, "/v1/admin/types/bad_one", `{"endpoint": {"url": "https://x.example"}, "schema": {"type":"object"}, "schema": {}}`)
	require.Equal(t, http.StatusBadRequest, status, string(data))

	status, _, _ = d.do(t, d.user, http.MethodGet, "/v1/types/bad_one", nil)
	require.Equal(t, http.StatusNotFound, status, "nothing was declared")
}

// A name a worker credential declared is not an operator's to take, nor
// the reverse: the first declaration owns the name until it is deleted.
func TestWorkerAndEndpointTypesNeverShareAName(t *testing.T) {
	t.Parallel()
	d := start(t)
	nc, err := d.sys.OwnConn("test-worker")
	require.NoError(t, err)
	const team = "0123456789abcdef"
	declare := func(cred, name string) *wire.Reply {
		req := wire.DeclareRequest{Worker: "w1", Type: wire.Declaration{Name: name,
			Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`), TimeoutSeconds: 10, Attempts: 1,
			MaxResultBytes: 10, ContentType: "text/plain"}}
		data, err := json.Marshal(req)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		msg, err := nc.RequestWithContext(ctx, wire.Subject(cred, name, wire.OpDeclare), data)
		require.NoError(t, err)
		var reply wire.Reply
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
		return &reply
	}
	require.Nil(t, declare(team, "team_export").Error)
	status, data, _ := d.do(t, d.operator, http.MethodPut, "/v1/admin/types/team_export", map[string]any{
		"schema": json.RawMessage(`{"type":"object","additionalProperties":false}`), "endpoint": map[string]any{"url": "https://x.example/"}})
	require.Equal(t, http.StatusConflict, status, string(data))
	require.Contains(t, string(data), "/problems/type-name-taken")

	status, data, _ = d.do(t, d.operator, http.MethodPut, "/v1/admin/types/permit_report", map[string]any{
		"schema": json.RawMessage(`{"type":"object","additionalProperties":false}`), "endpoint": map[string]any{"url": "https://x.example/"}})
	require.Equal(t, http.StatusConflict, status, string(data))
	require.Contains(t, string(data), "/problems/type-name-taken")

	d.declare(t, "ops_hook", "https://x.example/", nil)
	reply := declare(team, "ops_hook")
	require.NotNil(t, reply.Error)
	require.Equal(t, wire.CodeForbidden, reply.Error.Code)
	reply = declare(wire.JobgateCredential, "ops_hook")
	require.NotNil(t, reply.Error, "not even jobgate's own workers replace an operator's endpoint type")
	require.Equal(t, wire.CodeForbidden, reply.Error.Code)
	status, data, _ = d.do(t, d.user, http.MethodGet, "/v1/types/ops_hook", nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(data), `"endpoint"`, "still the endpoint type")
}

func TestRotatingTheSecretSignsWithBothForADay(t *testing.T) {
	t.Parallel()
	d := start(t)
	status, _, _ := d.do(t, d.operator, http.MethodPost, "/v1/admin/types/nothing_here/rotate-secret", nil)
	require.Equal(t, http.StatusNotFound, status)

	type delivery struct {
		h    http.Header
		body []byte
	}
	seen := make(chan delivery, 4)
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen <- delivery{r.Header.Clone(), body}
		w.WriteHeader(http.StatusNoContent)
	}))
	old := d.declare(t, "rotated", url, nil)
	status, data, _ := d.do(t, d.operator, http.MethodPost, "/v1/admin/types/rotated/rotate-secret", nil)
	require.Equal(t, http.StatusOK, status, string(data))
	var rot struct {
		Secret string `json:"secret"`
	}
	require.NoError(t, json.Unmarshal(data, &rot))
	require.True(t, strings.HasPrefix(rot.Secret, "whsec_"))
	require.NotEqual(t, old, rot.Secret)

	// Within the caller's key cache the next request is signed by both.
	var last delivery
	require.Eventually(t, func() bool {
		id := d.submit(t, "rotated", `{}`)
		d.until(t, id, 30*time.Second, terminal)
		last = <-seen
		return len(strings.Fields(last.h.Get("webhook-signature"))) == 2
	}, 30*time.Second, 100*time.Millisecond)
	for _, secret := range []string{old, rot.Secret} {
		v, err := endpoint.NewVerifier(secret)
		require.NoError(t, err)
		require.NoError(t, v.Verify(last.h, last.body), "each secret verifies the request on its own")
	}
}
