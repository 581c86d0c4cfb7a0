package notifier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/internal/job"
)

// Keys of the NOTICES bucket, all written by this package:
//
//	wh.<endpoint>.<job>.<event>   delivery state of one event at one endpoint
//	whoff.<endpoint>              the endpoint answered 410 Gone: disabled
//	mail.<t>.<r>.<job>.<state>    the create-only mail claim (at most one mail)
//	mailtry.<t>.<r>.<job>.<state> attempts of a mail not sent yet
//
// <endpoint> is a hash of tenant and URL, <event> the event's message id,
// <job> the job id and its created_at (event.jobScope), so a job admitted
// again under its key after its record expired is notified again. Keys live
// as long as records do (the bucket's TTL is the job TTL).

// Delivery statuses. Every status but pending is final.
const (
	statusPending   = "pending"
	statusDelivered = "delivered"
	statusFailed    = "failed"
	statusDisabled  = "disabled"
	statusRefused   = "refused"
	statusSending   = "sending"   // mail claimed, conversation under way
	statusSent      = "sent"      // mail accepted by the server (or outbox)
	statusUncertain = "uncertain" // mail may or may not have been accepted
)

// deliveryState is the durable progress of one delivery (a webhook to one
// endpoint, or a mail not sent yet).
type deliveryState struct {
	Status    string    `json:"status"`
	Attempts  int       `json:"attempts"`
	NextAt    time.Time `json:"next_at,omitzero"`
	LastError string    `json:"last_error,omitempty"`
	Instance  string    `json:"instance,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (s *deliveryState) final() bool { return s.Status != "" && s.Status != statusPending }

// endpointKey names a tenant's endpoint in keys: stable while its URL is.
func endpointKey(tenant, url string) string {
	h := sha256.Sum256([]byte(tenant + "\x00" + url))
	return hex.EncodeToString(h[:8])
}

// keyToken makes s usable as a key token: kept if it is made of the safe
// characters, else replaced by its hash.
func keyToken(s string) string {
	ok := s != "" && s[0] != '.' && s[len(s)-1] != '.'
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '='
	}
	if ok {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return "h" + hex.EncodeToString(h[:16])
}

// loadState reads a delivery state; a missing key is a fresh pending one.
func loadState(ctx context.Context, store noticeStore, key string) (deliveryState, error) {
	var st deliveryState
	data, _, err := store.Get(ctx, key)
	if errors.Is(err, job.ErrNotFound) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read %s: %w", key, err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return deliveryState{}, fmt.Errorf("decode %s: %w", key, err)
	}
	return st, nil
}

// putState writes a delivery state. Plain put, not compare-and-set: one event
// is handled by one instance at a time (JetStream hands it to one consumer
// and the handler keeps extending its ack deadline).
func (n *Notifier) putState(ctx context.Context, key string, st deliveryState) error {
	st.UpdatedAt = n.cfg.Now().UTC()
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if _, err := n.notices.Put(ctx, key, data); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

// exists reports whether key holds a value.
func exists(ctx context.Context, store noticeStore, key string) (bool, error) {
	_, _, err := store.Get(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, job.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("read %s: %w", key, err)
}
