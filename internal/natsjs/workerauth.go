package natsjs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"

	"github.com/nats-io/nats-server/v2/server"
)

// Worker processes (pkg/worker) outside the server's process log in as
// WorkerUser with a password derived from the same data-dir secret as the
// tenant subscribers' (`jobgate nats-user --worker` prints both).

// WorkerUser is the NATS user name of worker processes.
const WorkerUser = "worker"

// WorkerInboxPrefix is the reply-subject prefix workers use: their
// permissions let them subscribe there and nowhere else, so a worker never
// sees another client's replies, nor any tenant's events.
const WorkerInboxPrefix = "_JG_WORKER_INBOX"

// WorkerPassword derives the NATS password of worker processes.
func WorkerPassword(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("jobgate nats-user worker v1\x00"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// WorkerPermissions are exactly what a worker needs: declare types and
// announce itself, pull and acknowledge work, read and compare-and-set job
// records, store results (and read them back), publish the events of its own
// changes after a look at the job's newest one. It cannot create, change or
// delete streams, subscribe to events, or read other clients' replies.
func WorkerPermissions() *server.Permissions {
	kv := func(b string) []string {
		return []string{
			"$KV." + b + ".>",
			"$JS.API.STREAM.INFO.KV_" + b,
			"$JS.API.DIRECT.GET.KV_" + b + ".>",
			"$JS.API.STREAM.MSG.GET.KV_" + b,
		}
	}
	allow := []string{
		"$JS.API.INFO",
		"$JS.API.CONSUMER.CREATE." + StreamWork + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + StreamWork + ".*",
		"$JS.API.CONSUMER.INFO." + StreamWork + ".*",
		// Finding the tenants with work (OpenFairQueue), and removing the
		// single per-type consumer of earlier versions and the consumers
		// of a tenant's other layout (FairQueue.consumer).
		"$JS.API.STREAM.INFO." + StreamWork,
		"$JS.API.CONSUMER.DELETE." + StreamWork + ".*",
		"$JS.API.CONSUMER.LIST." + StreamWork,
		"$JS.API.CONSUMER.MSG.NEXT." + StreamWork + ".*",
		"$JS.ACK." + StreamWork + ".>",
		"$O." + BucketResults + ".>",
		"$JS.API.STREAM.INFO.OBJ_" + BucketResults,
		"$JS.API.STREAM.PURGE.OBJ_" + BucketResults,
		"$JS.API.DIRECT.GET.OBJ_" + BucketResults + ".>",
		"$JS.API.DIRECT.GET.OBJ_" + BucketResults, // by sequence: reading a result back (verifyResult)
		"$JS.API.STREAM.MSG.GET.OBJ_" + BucketResults,
		eventsPrefix + ">",
		// Looking up a job's newest event before publishing one, so events
		// stay in the order of their changes (EventStream.PublishAfter): a
		// get by subject, no subscription to anyone's events; what an event
		// holds the worker can read in the job's record anyway.
		"$JS.API.STREAM.INFO." + StreamEvents,
		"$JS.API.STREAM.MSG.GET." + StreamEvents,
		"$JS.API.DIRECT.GET." + StreamEvents + ".>",
	}
	allow = append(allow, kv(BucketJobs)...)
	allow = append(allow, kv(BucketTypes)...)
	allow = append(allow, kv(BucketWorkers)...)
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: allow},
		// Replies, and notices of new work (FairQueue.notice): the subjects
		// of work messages, which a worker may pull anyway.
		Subscribe: &server.SubjectPermission{Allow: []string{WorkerInboxPrefix + ".>", AllWork}},
	}
}
