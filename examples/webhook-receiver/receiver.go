package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Event is a jobgate webhook payload.
type Event struct {
	ID        string `json:"-"` // the webhook-id
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Job       struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Type  string `json:"type"`
	} `json:"data"`
}

var seenBucket = []byte("seen")

// Receiver is the webhook endpoint: verify, dedupe, process.
type Receiver struct {
	key       []byte
	db        *bolt.DB
	tolerance time.Duration
	now       func() time.Time
	process   func(Event) error
}

// Open opens (or creates) the dedupe file and returns the receiver.
// process runs once per webhook-id; if it fails the delivery is answered
// 500 and the id is not recorded, so the sender's retry processes it again.
func Open(path, secret string, tolerance time.Duration, process func(Event) error) (*Receiver, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(seenBucket)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Receiver{key: key, db: db, tolerance: tolerance, now: time.Now, process: process}, nil
}

// Close closes the dedupe file.
func (r *Receiver) Close() error { return r.db.Close() }

// Seen reports whether id was processed.
func (r *Receiver) Seen(id string) bool {
	var ok bool
	_ = r.db.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket(seenBucket).Get([]byte(id)) != nil
		return nil
	})
	return ok
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	id, err := verify(r.key, req.Header, body, r.now(), r.tolerance)
	if err != nil {
		// 401, not 410: a 410 would make jobgate disable this endpoint.
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "bad payload", http.StatusBadRequest)
		return
	}
	ev.ID = id
	duplicate := false
	// One write transaction records the id and runs the processing: two
	// concurrent deliveries of one id are serialized by bbolt, and a failed
	// processing rolls the record back.
	err = r.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(seenBucket)
		if b.Get([]byte(id)) != nil {
			duplicate = true
			return nil
		}
		if err := b.Put([]byte(id), []byte(r.now().UTC().Format(time.RFC3339Nano))); err != nil {
			return err
		}
		return r.process(ev)
	})
	switch {
	case err != nil:
		http.Error(w, "processing failed", http.StatusInternalServerError)
	case duplicate:
		w.Header().Set("X-Duplicate", "true")
		w.WriteHeader(http.StatusOK) // already handled: acknowledge so the sender stops
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
