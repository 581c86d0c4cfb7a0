package natsserver_test

import (
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// A worker credential of one type reaches nothing but that type's protocol
// subjects: the attacks of issue 22, tried with a plain nats.go client.
func TestAWorkerCredentialReachesOnlyItsTypesRequests(t *testing.T) {
	t.Parallel()
	b := setupTenantAuth(t)
	user, err := natsserver.WorkerUser([]string{"export_sales"})
	require.NoError(t, err)
	cred := wire.CredentialID(user)
	errs := make(chan error, 64)
	nc, err := nats.Connect(b.emb.ClientURL(), nats.UserInfo(user, natsserver.WorkerPassword(b.secret, user)),
		nats.CustomInboxPrefix(wire.InboxPrefix(cred)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	refused := func(what string, publish func() error) {
		t.Helper()
		require.NoError(t, publish())
		require.NoError(t, nc.Flush())
		select {
		case err := <-errs:
			require.ErrorIs(t, err, nats.ErrPermissionViolation, what)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s was not refused", what)
		}
	}
	refused("a forged event", func() error { return nc.Publish(natsjs.EventSubject("5", "x", "job_fake"), []byte(`{}`)) })
	refused("STREAM.INFO on the records", func() error {
		return nc.PublishRequest("$JS.API.STREAM.INFO.KV_"+natsjs.BucketJobs, wire.InboxPrefix(cred)+".x", []byte(`{"subjects_filter":">"}`))
	})
	refused("a record write", func() error { return nc.Publish("$KV."+natsjs.BucketJobs+".5.x.job_1", []byte(`{}`)) })
	refused("a direct get of a result", func() error {
		return nc.PublishRequest("$JS.API.DIRECT.GET.OBJ_"+natsjs.BucketResults, wire.InboxPrefix(cred)+".x", []byte(`{"seq":1}`))
	})
	refused("a purge", func() error {
		return nc.PublishRequest("$JS.API.STREAM.PURGE.OBJ_"+natsjs.BucketResults, wire.InboxPrefix(cred)+".x", nil)
	})
	refused("a consumer create", func() error {
		return nc.PublishRequest("$JS.API.CONSUMER.CREATE."+natsjs.StreamWork, wire.InboxPrefix(cred)+".x", []byte(`{}`))
	})
	refused("another type's requests", func() error {
		return nc.PublishRequest(wire.Subject(cred, "permit_report", wire.OpNext), wire.InboxPrefix(cred)+".x", []byte(`{}`))
	})
	refused("another credential's requests", func() error {
		return nc.PublishRequest(wire.Subject(wire.JobgateCredential, "export_sales", wire.OpNext), wire.InboxPrefix(cred)+".x", []byte(`{}`))
	})
	refused("subscribing to the work", func() error { _, err := nc.SubscribeSync("jobgate.work.>"); return err })
	refused("subscribing to another inbox", func() error { _, err := nc.SubscribeSync("_INBOX.>"); return err })
	// Its own type's requests go out (nobody answers in this test).
	_, err = nc.Request(wire.Subject(cred, "export_sales", wire.OpNext), []byte(`{}`), 200*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrNoResponders)
	select {
	case err := <-errs:
		t.Fatalf("its own request was refused: %v", err)
	default:
	}
}

func TestWorkerCredentialsCannotBeMintedForBuiltinsOrForged(t *testing.T) {
	t.Parallel()
	_, err := natsserver.WorkerUser([]string{"permit_report"})
	require.ErrorContains(t, err, "built-in")
	user, err := natsserver.WorkerUser([]string{"b_type", "a_type", "b_type"})
	require.NoError(t, err)
	require.Equal(t, "jgw.a_type.b_type", user)
	_, ok := natsserver.WorkerTypes("jgw.b_type.a_type")
	require.False(t, ok, "only the canonical name is a credential")
	_, ok = natsserver.WorkerTypes("jgw.permit_report")
	require.False(t, ok)
	b := setupTenantAuth(t)
	_, err = nats.Connect(b.emb.ClientURL(), nats.UserInfo(user, natsserver.WorkerPassword(b.secret, "jgw.a_type")))
	require.Error(t, err, "another credential's password is refused")
}
