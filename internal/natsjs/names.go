package natsjs

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Stream, bucket and subject names. Nothing outside this package spells them.
const (
	BucketJobs    = "JOBGATE_JOBS"    // KV: one record per job, key tenant.requester.id
	BucketMeta    = "JOBGATE_META"    // KV: deployment secrets shared by every process
	BucketNotices = "JOBGATE_NOTICES" // KV: create-only send records of the notifier
	BucketResults = "JOBGATE_RESULTS" // object store: rendered results
	BucketTypes   = "JOBGATE_TYPES"   // KV: one declaration per job type, written by its workers
	BucketWorkers = "JOBGATE_WORKERS" // KV: live worker processes, key type.worker, expiring
	BucketSlots   = "JOBGATE_SLOTS"   // KV: endpoint types' request slots, key type.n, expiring leases
	StreamWork    = "JOBGATE_WORK"    // work queue, one subject tree per job type
	StreamEvents  = "JOBGATE_EVENTS"  // job state changes for subscribers

	StreamDeliveries = "JOBGATE_DELIVERIES" // the notifier's pending deliveries, per destination
	StreamSchedule   = "JOBGATE_SCHEDULE"   // the scheduled set: an entry per job with a run_at ahead, per minute (schedule.go)

	ConsumerRelay        = "relay"    // durable consumer on the job record change log
	ConsumerNotifier     = "notifier" // durable consumer on StreamEvents
	workConsumerPre      = "work_"    // + type [+ "-" + tenant]: the pull consumers of a type's workers
	requesterConsumerPre = "workr_"   // + type + "-" + hash of tenant and requester
	workPrefix           = "jobgate.work."
	deliveriesPrefix     = "jobgate.deliveries."
	deliveryConsumerPre  = "deliver_" // + destination: the consumer of its deliveries
	eventsPrefix         = "jobgate.events."
	schedulePrefix       = "jobgate.schedule."
	jobChangesPrefix     = "$KV." + BucketJobs + "."
)

// WorkSubject is where the work message of a job is published: under its
// type, so the workers of one type pull only that type's work.
func WorkSubject(typ, tenant, requester, id string) string {
	return laneSubject(typ, tenant, requester) + id
}

// laneSubject is what every work subject of one requester's lane begins
// with (the job's id, or its priority and id, follow; see WorkSubjectOf).
func laneSubject(typ, tenant, requester string) string {
	return workPrefix + typ + "." + tenant + "." + requester + "."
}

// TypeWork matches the work of one job type.
func TypeWork(typ string) string { return workPrefix + typ + ".>" }

// WorkConsumerName is the single consumer per type of earlier versions,
// which workers now remove (see WorkLanes.RemoveConsumers).
func WorkConsumerName(typ string) string { return workConsumerPre + typ }

// TenantWork matches the work of one tenant of a job type.
func TenantWork(typ, tenant string) string { return workPrefix + typ + "." + tenant + ".>" }

// TenantWorkConsumerName is the durable consumer of one tenant's work of a
// type, shared by the type's workers. A type name has no "-", so the name
// is unambiguous whatever the tenant id.
func TenantWorkConsumerName(typ, tenant string) string { return workConsumerPre + typ + "-" + tenant }

// RequesterWork matches the work of one requester of a tenant of a job type.
func RequesterWork(typ, tenant, requester string) string {
	return laneSubject(typ, tenant, requester) + ">"
}

// RequesterWorkConsumerName is the durable consumer of one requester's work
// of a type. Ids may hold "-" and "_", so no join of tenant and requester
// is unambiguous ("a-b"+"c" and "a"+"b-c"): the name carries a hash of the
// pair instead (96 bits; the consumer's description names them). Its
// prefix differs from that of the tenants' consumers ("workr_" vs
// "work_"), and the longest name is 6+64+1+24 = 95 bytes, well within
// NATS's limit of 255.
func RequesterWorkConsumerName(typ, tenant, requester string) string {
	h := sha256.Sum256([]byte(typ + "\x00" + tenant + "\x00" + requester))
	return requesterConsumerPre + typ + "-" + hex.EncodeToString(h[:12])
}

// EventSubject is where the state changes of a job are published.
func EventSubject(tenant, requester, id string) string {
	return eventsPrefix + tenant + "." + requester + "." + id
}

// TenantEvents is the subscription subject for all events of a tenant.
func TenantEvents(tenant string) string { return eventsPrefix + tenant + ".>" }

// AllEvents matches every event subject.
const AllEvents = eventsPrefix + ">"

// NotifierConsumerName is the notifiers' durable consumer of one tenant's
// events.
func NotifierConsumerName(tenant string) string { return ConsumerNotifier + "_" + tenant }

// AllDeliveries matches every delivery task subject.
const AllDeliveries = deliveriesPrefix + ">"

// AllWork matches every work subject.
const AllWork = workPrefix + ">"

// JobChanges matches every change of every job record (the KV change log).
const JobChanges = jobChangesPrefix + ">"

// JobChangeKey returns the record key of a KV change-log subject, or "".
func JobChangeKey(subject string) string {
	if len(subject) <= len(jobChangesPrefix) || subject[:len(jobChangesPrefix)] != jobChangesPrefix {
		return ""
	}
	return subject[len(jobChangesPrefix):]
}

// ScopeOf splits a work or event subject, or a record key, into its scope and
// job id. ok is false when the text does not have that shape.
func ScopeOf(s string) (tenant, requester, id string, ok bool) {
	switch {
	case len(s) > len(workPrefix) && s[:len(workPrefix)] == workPrefix:
		s = s[len(workPrefix):]
		typ, rest, found := strings.Cut(s, ".")
		if !found || typ == "" {
			return "", "", "", false
		}
		s = rest
	case len(s) > len(eventsPrefix) && s[:len(eventsPrefix)] == eventsPrefix:
		s = s[len(eventsPrefix):]
	}
	var parts [3]string
	n := 0
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if n == 3 {
				return "", "", "", false
			}
			parts[n] = s[start:i]
			n++
			start = i + 1
		}
	}
	if n != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}
