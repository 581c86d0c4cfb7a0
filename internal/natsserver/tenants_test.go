package natsserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// tenantBundle is an embedded server that listens for outside clients with
// tenant auth, and the in-process resources of jobgate on it.
type tenantBundle struct {
	emb    *natsserver.Embedded
	res    *natsjs.Resources
	secret []byte
}

func setupTenantAuth(t *testing.T) *tenantBundle {
	t.Helper()
	dir := t.TempDir()
	secret, err := natsserver.SubscriberSecret(dir)
	require.NoError(t, err)
	again, err := natsserver.SubscriberSecret(dir)
	require.NoError(t, err)
	require.Equal(t, secret, again, "the secret is created once and then read back")
	auth, err := natsserver.NewTenantAuth(secret)
	require.NoError(t, err)
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: dir + "/nats", Listen: "127.0.0.1:-1", Configure: auth.Configure})
	require.NoError(t, err)
	t.Cleanup(emb.Shutdown)
	require.NotEmpty(t, emb.ClientURL())

	// The process's own in-process connection needs no credentials and keeps
	// full access: it provisions everything and publishes.
	nc, err := emb.Connect("jobgate-test")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := natsjs.Provision(ctx, js, natsjs.DefaultLayout())
	require.NoError(t, err)
	return &tenantBundle{emb: emb, res: res, secret: secret}
}

// subscriber connects over TCP as tenant's subscriber; errs receives the
// connection's asynchronous errors (permission violations).
func (b *tenantBundle) subscriber(t *testing.T, tenant string) (*nats.Conn, chan error) {
	t.Helper()
	errs := make(chan error, 16)
	nc, err := nats.Connect(b.emb.ClientURL(),
		nats.UserInfo(natsserver.TenantUser(tenant), natsserver.TenantPassword(b.secret, tenant)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc, errs
}

func publishState(t *testing.T, res *natsjs.Resources, tenant, requester, id string) {
	t.Helper()
	now := time.Now().UTC()
	r := &job.Record{ID: id, Tenant: tenant, Requester: requester, Type: "permit_report", Params: []byte(`{}`),
		State: job.StateQueued, CreatedAt: now, UpdatedAt: now}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, natsjs.PublishEvent(ctx, res.JS, r))
}

func TestTenantSubscriberSeesOnlyItsTenant(t *testing.T) {
	t.Parallel()
	b := setupTenantAuth(t)
	nc5, errs5 := b.subscriber(t, "5")
	own, err := nc5.SubscribeSync(natsjs.TenantEvents("5"))
	require.NoError(t, err)
	require.NoError(t, nc5.Flush())

	// Subscribing to tenant 4's events is refused by the server.
	foreign, err := nc5.SubscribeSync(natsjs.TenantEvents("4"))
	require.NoError(t, err) // the refusal arrives asynchronously
	select {
	case err := <-errs5:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
		require.Contains(t, err.Error(), `jobgate.events.4.>`)
	case <-time.After(10 * time.Second):
		t.Fatal("subscription to another tenant's events was not refused")
	}
	// So is a wildcard over all tenants.
	_, err = nc5.SubscribeSync("jobgate.events.>")
	require.NoError(t, err)
	select {
	case err := <-errs5:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
	case <-time.After(10 * time.Second):
		t.Fatal("subscription to every tenant's events was not refused")
	}

	publishState(t, b.res, "4", "reviewer-47", "job_four")
	publishState(t, b.res, "5", "reviewer-9", "job_five")
	msg, err := own.NextMsg(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, natsjs.EventSubject("5", "reviewer-9", "job_five"), msg.Subject,
		"the first event tenant 5 sees is its own, though tenant 4's was published first")
	_, err = own.NextMsg(200 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout, "tenant 5 receives nothing else")
	_, err = foreign.NextMsg(200 * time.Millisecond)
	require.Error(t, err, "the refused subscription delivers nothing")

	// A tenant-4 subscriber does get tenant 4's events.
	nc4, _ := b.subscriber(t, "4")
	sub4, err := nc4.SubscribeSync(natsjs.TenantEvents("4"))
	require.NoError(t, err)
	require.NoError(t, nc4.Flush())
	publishState(t, b.res, "4", "reviewer-47", "job_four_b")
	msg, err = sub4.NextMsg(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, natsjs.EventSubject("4", "reviewer-47", "job_four_b"), msg.Subject)
}

func TestTenantSubscriberCannotPublishOrUseJetStream(t *testing.T) {
	t.Parallel()
	b := setupTenantAuth(t)
	nc, errs := b.subscriber(t, "5")

	// Publishing a fake event of its own tenant is refused.
	require.NoError(t, nc.Publish(natsjs.EventSubject("5", "x", "job_fake"), []byte(`{}`)))
	select {
	case err := <-errs:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
	case <-time.After(10 * time.Second):
		t.Fatal("publish was not refused")
	}
	// No JetStream API: reading the job bucket through it fails.
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = js.KeyValue(ctx, natsjs.BucketJobs)
	require.Error(t, err)
	info, _ := b.res.JS.Stream(context.Background(), natsjs.StreamEvents)
	require.NotNil(t, info, "the in-process connection still reaches JetStream")
}

func TestOutsideClientsMustAuthenticate(t *testing.T) {
	t.Parallel()
	b := setupTenantAuth(t)
	cases := map[string][]nats.Option{
		"no credentials":       nil,
		"wrong password":       {nats.UserInfo(natsserver.TenantUser("5"), "guess")},
		"other tenant's pass":  {nats.UserInfo(natsserver.TenantUser("5"), natsserver.TenantPassword(b.secret, "4"))},
		"not a tenant user":    {nats.UserInfo("admin", natsserver.TenantPassword(b.secret, "admin"))},
		"invalid tenant id":    {nats.UserInfo(natsserver.TenantUser("a.b"), natsserver.TenantPassword(b.secret, "a.b"))},
		"internal name by tcp": {nats.UserInfo("jobgate-internal", "")},
		"operator, wrong pass": {nats.UserInfo(natsserver.OperatorUser, natsserver.TenantPassword(b.secret, "4"))},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := nats.Connect(b.emb.ClientURL(), append(opts, nats.MaxReconnects(0))...)
			require.Error(t, err)
			require.True(t, errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
				err.Error() == "nats: Authorization Violation", "got %v", err)
		})
	}
}

// The operator's tools (jobgate backup) log in with the password derived
// from the data dir's secret and reach the JetStream API, which tenants
// and workers cannot.
func TestOperatorUserReachesJetStream(t *testing.T) {
	t.Parallel()
	b := setupTenantAuth(t)
	nc, err := nats.Connect(b.emb.ClientURL(), nats.UserInfo(natsserver.OperatorUser, natsserver.OperatorPassword(b.secret)), nats.MaxReconnects(0))
	require.NoError(t, err)
	defer nc.Close()
	msg, err := nc.Request("$JS.API.INFO", nil, 5*time.Second)
	require.NoError(t, err)
	require.Contains(t, string(msg.Data), `"type":"io.nats.jetstream.api.v1.account_info_response"`)
	require.NotContains(t, string(msg.Data), `"error"`)
}

func TestTenantPasswordIsDeterministicPerTenant(t *testing.T) {
	t.Parallel()
	s := []byte("0123456789abcdef0123456789abcdef")
	require.Equal(t, natsserver.TenantPassword(s, "4"), natsserver.TenantPassword(s, "4"))
	require.NotEqual(t, natsserver.TenantPassword(s, "4"), natsserver.TenantPassword(s, "5"))
	require.NotEqual(t, natsserver.TenantPassword(s, "4"), natsserver.TenantPassword([]byte("another secret, another password"), "4"))
}
