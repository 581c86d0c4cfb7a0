package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/jobgate/jobgate/pkg/api"
)

// Outcomes of ApplyEndpointType.
const (
	Created   = "created"
	Changed   = "changed"
	Unchanged = "unchanged"
)

// EndpointApply is what ApplyEndpointType did.
type EndpointApply struct {
	// Outcome is Created, Changed or Unchanged.
	Outcome string
	// Type is the declaration as stored. On a creation its
	// Endpoint.Secret is the signing secret, shown this once.
	Type *api.EndpointTypeResource
	// Retried says the call was sent more than once, an earlier answer
	// lost: what that attempt did (perhaps the creation, whose secret is
	// lost with it: RotateEndpointSecret makes a new one) the Outcome does
	// not say.
	Retried bool
}

// ApplyEndpointType declares name as an endpoint type (PUT
// /v1/admin/types/{name}; docs/endpoints.md) with decl, an
// api.EndpointType or any value that encodes to its JSON (members it does
// not know are the server's to refuse), and says whether that created the
// type, changed it or left it as it was. A name a worker credential
// declared is a *ProblemError matching api.ErrTypeNameTaken; an invalid
// declaration one matching api.ErrValidation, naming each member. The
// outcome is the gateway's (its Jobgate-Type-Change header).
func (a *Admin) ApplyEndpointType(ctx context.Context, name string, decl any) (*EndpointApply, error) {
	body, err := json.Marshal(decl)
	if err != nil {
		return nil, fmt.Errorf("encode the declaration: %w", err)
	}
	resp, attempts, err := a.c.send(ctx, &request{method: http.MethodPut, path: adminTypePath(name), body: body,
		header: http.Header{"Content-Type": {"application/json"}}})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return nil, a.c.unexpected(resp)
	}
	var t api.EndpointTypeResource
	if err := decodeJSON(resp, &t); err != nil {
		return nil, err
	}
	out := &EndpointApply{Type: &t, Outcome: resp.Header.Get("Jobgate-Type-Change")}
	switch {
	case resp.StatusCode == http.StatusCreated:
		out.Outcome = Created
	case out.Outcome != Changed && out.Outcome != Unchanged:
		out.Outcome = Changed // a gateway that does not say: assume the worst
	}
	// An earlier attempt's answer was lost: it may have been the creation
	// (whose secret is gone with it), or the change.
	out.Retried = attempts > 1
	return out, nil
}

// RotateEndpointSecret makes a new signing secret for an endpoint type and
// returns it (shown this once); the previous one signs beside it for 24
// hours. Each call rotates again: a retried call whose first answer was
// lost rotated twice, and the secret returned is the current one.
func (a *Admin) RotateEndpointSecret(ctx context.Context, name string) (string, error) {
	var s api.EndpointSecret
	if err := a.call(ctx, &request{method: http.MethodPost, path: adminTypePath(name) + "/rotate-secret"}, http.StatusOK, &s); err != nil {
		return "", err
	}
	return s.Secret, nil
}
