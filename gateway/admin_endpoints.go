package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/canon"
	"github.com/jobgate/jobgate/internal/egress"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/schema"
	"github.com/jobgate/jobgate/internal/stdwebhook"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
)

// Endpoint types (docs/endpoints.md): the operator declares a type whose
// attempts jobgate's endpoint caller POSTs to a team's HTTP handler. The
// declaration goes through the same checks as a worker's (the schema
// compiled with jobgate's bounds, the limits of api.TypeDecl) and is
// stored owned by jobgate; its signing key is made here and kept with the
// deployment's secrets, shown once, when the type is created (and when a
// rotation makes a new one).

// endpointTypes is what these endpoints need of the type store
// (natsjs.TypeStore).
type endpointTypes interface {
	DeclareEndpoint(ctx context.Context, d *job.TypeDecl) (bool, *job.TypeDecl, error)
}

// endpointSecrets is what they need of the secrets (natsjs.Secrets).
type endpointSecrets interface {
	SetEndpointKey(ctx context.Context, typ string, key []byte, now time.Time) error
	CreateEndpointKey(ctx context.Context, typ string, key []byte, now time.Time) error
	RotateEndpointKey(ctx context.Context, typ string, key []byte, now time.Time) error
	DeleteEndpointKeys(ctx context.Context, typ string) error
}

// headerTypeChange says what a PUT of an endpoint type did: created,
// changed or unchanged.
const headerTypeChange = "Jobgate-Type-Change"

// adminEndpointRoutes adds the operator's endpoint type routes.
func (g *Gateway) adminEndpointRoutes(v1 fiber.Router) {
	v1.Put("/admin/types/:name", g.operatorRole, g.adminPutEndpointType)
	v1.Post("/admin/types/:name/rotate-secret", g.operatorRole, g.adminRotateEndpointSecret)
}

func (g *Gateway) endpointStores() (endpointTypes, endpointSecrets, error) {
	t, ok := g.types.src.(endpointTypes)
	s, ok2 := g.secrets.(endpointSecrets)
	if !ok || !ok2 {
		return nil, nil, fmt.Errorf("%w: this gateway cannot declare endpoint types", job.ErrUnavailable)
	}
	return t, s, nil
}

// endpointBody is the body of PUT /v1/admin/types/{name}.
var (
	endpointTopFields = map[string]bool{"description": true, "schema": true, "timeout_seconds": true, "attempts": true,
		"max_result_bytes": true, "content_type": true, "endpoint": true, "retry": true, "concurrency": true, "rate_limit": true}
	endpointFields = map[string]bool{"url": true, "concurrency": true, "rate_per_second": true}
)

// adminPutEndpointType is PUT /v1/admin/types/{name}: 201 with the signing
// secret when it creates the type, 200 when it changed or left it as it
// was (the same body again writes nothing), 409 type-name-taken when a
// worker credential declared the name (or it is built in), 422 naming
// every invalid field.
func (g *Gateway) adminPutEndpointType(c *fiber.Ctx) error {
	name, err := typeName(c)
	if err != nil {
		return writeProblem(c, job.Userf(job.ErrValidation, "a type name must match [a-z][a-z0-9_]{0,63}"))
	}
	if wire.Builtin(name) {
		return writeProblem(c, job.Userf(api.ErrTypeNameTaken, "%s is a built-in type", name))
	}
	d, err := g.decodeEndpointType(c, name)
	if err != nil {
		return writeProblem(c, err)
	}
	types, secrets, err := g.endpointStores()
	if err != nil {
		return writeProblem(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout)
	defer cancel()
	created, stored, err := types.DeclareEndpoint(ctx, d)
	switch {
	case errors.Is(err, natsjs.ErrNameTaken):
		return writeProblem(c, job.Userf(api.ErrTypeNameTaken, "%s is declared by a worker credential: delete it first, or choose another name", name))
	case err != nil:
		return writeProblem(c, typeStoreErr(name, err))
	}
	view := endpointResource(stored)
	status := http.StatusOK
	change := "changed"
	if !stored.DeclaredAt.Equal(d.DeclaredAt) {
		change = "unchanged" // the declaration stored was the same: nothing was written
	}
	now := g.cfg.Now().UTC()
	if created {
		key, err := stdwebhook.NewKey()
		if err == nil {
			err = secrets.SetEndpointKey(ctx, name, key, now)
		}
		if err != nil {
			// The type stands without a key; the caller leaves its jobs
			// queued until one is stored, which the same PUT again does.
			return writeProblem(c, fmt.Errorf("%w: the signing secret could not be stored: %w", job.ErrUnavailable, err))
		}
		view.Endpoint.Secret = stdwebhook.EncodeSecret(key)
		status, change = http.StatusCreated, "created"
		g.log.Info("endpoint type created by an operator", "type", name, "host", egress.RedactURL(stored.Endpoint.URL), "by", identity(c).Requester)
	} else {
		// A type whose creation stored no key (the store failed right
		// after the declaration) gets one now, shown as at a creation.
		key, kerr := stdwebhook.NewKey()
		if kerr == nil {
			kerr = secrets.CreateEndpointKey(ctx, name, key, now)
		}
		switch {
		case kerr == nil:
			view.Endpoint.Secret = stdwebhook.EncodeSecret(key)
			status, change = http.StatusCreated, "created"
		case !errors.Is(kerr, natsjs.ErrExists):
			return writeProblem(c, fmt.Errorf("%w: the signing secret could not be stored: %w", job.ErrUnavailable, kerr))
		}
		g.log.Info("endpoint type declared by an operator", "type", name, "change", change,
			"host", egress.RedactURL(stored.Endpoint.URL), "by", identity(c).Requester)
	}
	c.Set(fiber.HeaderLocation, "/v1/types/"+name)
	// What the call did, for tools that report it (jobgate types apply):
	// 200 answers both a change and none.
	c.Set(headerTypeChange, change)
	return g.writeAdmin(c, status, view)
}

// adminRotateEndpointSecret is POST /v1/admin/types/{name}/rotate-secret:
// a new signing secret, shown once; the old one signs beside it
// (a second v1 signature) for natsjs.EndpointKeyOverlap.
func (g *Gateway) adminRotateEndpointSecret(c *fiber.Ctx) error {
	name, err := typeName(c)
	if err != nil {
		return writeProblem(c, err)
	}
	// Only an endpoint type has a key to rotate: the key store, not this
	// gateway's view of the types (a moment behind a creation), says so.
	_, secrets, err := g.endpointStores()
	if err != nil {
		return writeProblem(c, err)
	}
	key, err := stdwebhook.NewKey()
	if err != nil {
		return writeProblem(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout)
	defer cancel()
	if err := secrets.RotateEndpointKey(ctx, name, key, g.cfg.Now().UTC()); err != nil {
		if errors.Is(err, job.ErrNotFound) {
			return writeProblem(c, job.Userf(job.ErrNotFound, "no endpoint type %s is declared", name))
		}
		return writeProblem(c, typeStoreErr(name, err))
	}
	g.log.Info("endpoint type's signing secret rotated by an operator", "type", name, "by", identity(c).Requester)
	return g.writeAdmin(c, http.StatusOK, api.EndpointSecret{Secret: stdwebhook.EncodeSecret(key)})
}

// forgetEndpointKeys drops a deleted endpoint type's signing keys; a key
// left behind is harmless (a new type of the name gets a new one), so a
// failure is only logged.
func (g *Gateway) forgetEndpointKeys(ctx context.Context, name string) {
	if _, secrets, err := g.endpointStores(); err == nil {
		if err := secrets.DeleteEndpointKeys(ctx, name); err != nil {
			g.log.Warn("a deleted endpoint type's signing secret was not removed", "type", name, "err", err)
		}
	}
}

func endpointResource(d *job.TypeDecl) api.EndpointTypeResource {
	return api.EndpointTypeResource{TypeDecl: d.Public(), DeclaredAt: d.DeclaredAt, Endpoint: api.EndpointView{Endpoint: *d.Endpoint}, Paused: d.Paused}
}

// decodeEndpointType reads and checks a PUT body: one JSON object of at
// most maxBody bytes (else 413; not JSON, 400), whose members are those of
// api.EndpointType, each checked: every invalid one is named by its
// pointer in one 422.
func (g *Gateway) decodeEndpointType(c *fiber.Ctx, name string) (*job.TypeDecl, error) {
	body := c.BodyRaw() // never Body: see refuseContentCoding
	if len(body) > maxBody {
		return nil, job.ErrPayloadTooLarge
	}
	if ct := c.Get(fiber.HeaderContentType); ct != "" && ct != fiber.MIMEApplicationJSON {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, job.Userf(errUnsupportedMedia, "send the body as application/json")
		}
	}
	v, err := canon.DecodeStrict(body)
	if err != nil {
		return nil, err
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, job.Userf(job.ErrMalformed, "body must be a JSON object")
	}
	var fe []job.FieldError
	bad := func(ptr, rule, msg string) { fe = append(fe, job.FieldError{Field: ptr, Rule: rule, Message: msg}) }
	unknown := func(prefix string, m map[string]any, allowed map[string]bool) {
		for k := range m {
			if !allowed[k] {
				if len(k) > 32 {
					k = strings.ToValidUTF8(k[:32], "") + "..."
				}
				bad(prefix+"/"+canon.EscapePointerToken(k), "additionalProperties", "is not allowed")
			}
		}
	}
	unknown("", top, endpointTopFields)
	ep, isObj := top["endpoint"].(map[string]any)
	switch {
	case top["endpoint"] == nil:
		bad("/endpoint", "required", "is required")
	case !isObj:
		bad("/endpoint", "type", "must be an object")
	default:
		unknown("/endpoint", ep, endpointFields)
		if _, has := ep["url"]; !has {
			bad("/endpoint/url", "required", "is required")
		}
	}
	if _, has := top["schema"]; !has {
		bad("/schema", "required", "is required")
	}
	var req api.EndpointType
	if err := json.Unmarshal(body, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			bad("/"+strings.ReplaceAll(te.Field, ".", "/"), "type", "must be a "+jsonKind(te.Type.Kind().String()))
		} else {
			bad("", "type", "does not fit the declaration's fields")
		}
		return nil, &job.ValidationError{Errors: fe}
	}
	d := &job.TypeDecl{
		Name: name, Description: req.Description, Schema: req.Schema,
		TimeoutSeconds: req.TimeoutSeconds, Attempts: req.Attempts, MaxResultBytes: req.MaxResultBytes,
		ContentType: req.ContentType, DeclaredAt: g.cfg.Now().UTC(), Owner: wire.JobgateCredential,
		Endpoint: &api.Endpoint{URL: req.Endpoint.URL, Concurrency: req.Endpoint.Concurrency, RatePerSecond: req.Endpoint.RatePerSecond},
		Flow:     req.Flow,
	}
	endpointDefaults(d)
	if len(req.Schema) > 0 {
		if _, err := schema.Compile(req.Schema); err != nil {
			var se *schema.Error
			if errors.As(err, &se) {
				bad("/schema"+se.Pointer, se.Keyword, se.Reason)
			} else {
				bad("/schema", "schema", err.Error())
			}
		}
	}
	field := func(ptr string, check func() error) {
		if err := check(); err != nil {
			bad(ptr, "bounds", strings.TrimPrefix(err.Error(), api.ErrInvalidType.Error()+": "))
		}
	}
	one := func(set func(*api.TypeDecl)) func() error {
		return func() error {
			p := api.TypeDecl{Name: "x", Schema: json.RawMessage(`{}`), TimeoutSeconds: 1, Attempts: 1, MaxResultBytes: 1,
				ContentType: "application/octet-stream"}
			set(&p)
			return p.Validate()
		}
	}
	field("/description", one(func(p *api.TypeDecl) { p.Description = d.Description }))
	field("/timeout_seconds", one(func(p *api.TypeDecl) { p.TimeoutSeconds = d.TimeoutSeconds }))
	field("/attempts", one(func(p *api.TypeDecl) { p.Attempts = d.Attempts }))
	field("/max_result_bytes", one(func(p *api.TypeDecl) { p.MaxResultBytes = d.MaxResultBytes }))
	field("/content_type", func() error { return api.CheckContentType(d.ContentType) })
	// The flow fields, each checked on its own so that a 422 points at it.
	field("/retry", func() error { return (&api.Flow{Retry: d.Retry}).Check() })
	for i, k := range d.Concurrency {
		if i >= api.MaxConcurrencyKeys {
			bad("/concurrency", "maxItems", fmt.Sprintf("at most %d entries", api.MaxConcurrencyKeys))
			break
		}
		field(fmt.Sprintf("/concurrency/%d", i), func() error { return (&api.Flow{Concurrency: []api.ConcurrencyKey{k}}).Check() })
	}
	if d.RateLimit != nil {
		field("/rate_limit", func() error { return (&api.Flow{RateLimit: d.RateLimit}).Check() })
	}
	if isObj {
		field("/endpoint/concurrency", func() error {
			e := *d.Endpoint
			e.URL = "https://x"
			e.RatePerSecond = 0
			return e.Validate()
		})
		field("/endpoint/rate_per_second", func() error {
			e := *d.Endpoint
			e.URL, e.Concurrency = "https://x", 1
			return e.Validate()
		})
		if _, has := ep["url"]; has {
			field("/endpoint/url", func() error {
				if len(d.Endpoint.URL) > api.MaxEndpointURLLen {
					return fmt.Errorf("must be at most %d bytes", api.MaxEndpointURLLen)
				}
				if _, _, err := g.cfg.Endpoints.CheckURL(d.Endpoint.URL); err != nil {
					return fmt.Errorf("%w (private addresses need JOBGATE_ENDPOINT_ALLOW)", err)
				}
				return nil
			})
		}
	}
	if len(fe) > 0 {
		return nil, &job.ValidationError{Errors: fe}
	}
	if err := d.Validate(); err != nil {
		// Every field passed on its own: what is left is the whole.
		return nil, &job.ValidationError{Errors: []job.FieldError{{Field: "", Rule: "bounds", Message: err.Error()}}}
	}
	return d, nil
}

// endpointDefaults fills the limits a declaration left out, as pkg/worker
// does for a worker's.
func endpointDefaults(d *job.TypeDecl) {
	if d.TimeoutSeconds == 0 {
		d.TimeoutSeconds = int(api.DefaultTimeout / time.Second)
	}
	if d.Attempts == 0 {
		d.Attempts = api.DefaultAttempts
	}
	if d.MaxResultBytes == 0 {
		d.MaxResultBytes = api.DefaultMaxResultBytes
	}
	if d.ContentType == "" {
		d.ContentType = "application/octet-stream"
	}
	if d.Endpoint.Concurrency == 0 {
		d.Endpoint.Concurrency = api.DefaultEndpointConcurrency
	}
}

func jsonKind(k string) string {
	switch k {
	case "int", "int64", "float64":
		return "number"
	case "string":
		return "string"
	case "struct", "map":
		return "object"
	case "slice":
		return "array or string"
	}
	return k
}
