package chaos

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/test/jobtest"
)

// webhookSink is the tenant's webhook receiver: it verifies each delivery's
// Standard Webhooks signature, writes it to the history and answers 204,
// or 503 for a seeded share of deliveries so the notifier's retries run.
type webhookSink struct {
	h       *History
	key     []byte
	srv     *http.Server
	url     string
	mu      sync.Mutex
	rng     *rand.Rand
	failPct int
	count   int
	ok      map[string]map[string]bool // job → states delivered with a 2xx answer
}

func startWebhookSink(h *History, key []byte, seed uint64, failPct int) (*webhookSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &webhookSink{h: h, key: key, rng: rand.New(rand.NewPCG(seed, 0x5eb400c)), failPct: failPct, ok: map[string]map[string]bool{}}
	s.url = "http://" + l.Addr().String() + "/hook"
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

func (s *webhookSink) close() { _ = s.srv.Close() }

// The type of a batch's one notice, and the state that stands for it in
// the sink's and the mail's records (the notifier's own name for it).
const (
	batchNoticeType = "batch.completed"
	batchCompleted  = "completed"
)

func (s *webhookSink) accepted(id, state string) {
	if s.ok[id] == nil {
		s.ok[id] = map[string]bool{}
	}
	s.ok[id][state] = true
}

// delivered reports whether a change of job to state was delivered (of a
// batch to batchCompleted: its notice).
func (s *webhookSink) delivered(job, state string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ok[job][state]
}

func (s *webhookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	id := r.Header.Get("webhook-id")
	ts := r.Header.Get("webhook-timestamp")
	e := Entry{Kind: "webhook", WebhookID: id, SigOK: s.verify(id, ts, body, r.Header.Get("webhook-signature"))}
	var p struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &p) == nil {
		sum := sha256.Sum256(p.Data)
		e.Digest = hex.EncodeToString(sum[:])
		e.Type = p.Type
		if p.Type == batchNoticeType {
			// A batch's one notice: its data names the batch, not a job.
			var n struct {
				ID     string         `json:"id"`
				Total  int            `json:"total"`
				Counts map[string]int `json:"counts"`
				Jobs   []Item         `json:"jobs"`
			}
			if json.Unmarshal(p.Data, &n) == nil {
				e.Batch, e.Size, e.Counts, e.Items = n.ID, int64(n.Total), n.Counts, n.Jobs
			}
		} else {
			var res struct {
				ID      string `json:"id"`
				State   string `json:"state"`
				Attempt int    `json:"attempt"`
			}
			if json.Unmarshal(p.Data, &res) == nil {
				e.Job, e.State, e.Attempt = res.ID, res.State, res.Attempt
			}
		}
	}
	s.mu.Lock()
	fail := s.rng.IntN(100) < s.failPct
	s.count++
	e.Status = http.StatusNoContent
	if fail {
		e.Status = http.StatusServiceUnavailable
	} else if e.Job != "" {
		s.accepted(e.Job, e.State)
	} else if e.Batch != "" {
		s.accepted(e.Batch, batchCompleted)
	}
	s.mu.Unlock()
	s.h.Add(e)
	// No Retry-After: it would pause the whole destination (the notifier
	// honours it per endpoint), and at a few 503s a second the backlog
	// would only grow.
	w.WriteHeader(e.Status)
}

// verify checks a Standard Webhooks signature header (one or more
// space-separated "v1,<base64>").
func (s *webhookSink) verify(id, ts string, body []byte, header string) bool {
	if _, err := strconv.ParseInt(ts, 10, 64); err != nil || id == "" {
		return false
	}
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, part := range strings.Fields(header) {
		sig, ok := strings.CutPrefix(part, "v1,")
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// mailEntries turns what the SMTP sink accepted into history entries. The
// notifier's Message-ID is <job>.<state>@jobgate, for a batch's one mail
// <batch>.completed@jobgate, whose body lists every job with its state.
func mailEntries(sink *jobtest.SMTPSink) []Entry {
	var out []Entry
	for _, m := range sink.Received() {
		e := Entry{Kind: "mail", Note: strings.Join(m.To, ",")}
		if msg, err := mail.ReadMessage(strings.NewReader(m.Data)); err == nil {
			e.MessageID = strings.Trim(msg.Header.Get("Message-Id"), "<>")
			e.MsgID = msg.Header.Get("X-Jobgate-Event")
			local, _, _ := strings.Cut(e.MessageID, "@")
			if i := strings.LastIndexByte(local, '.'); i > 0 {
				e.Job, e.State = local[:i], local[i+1:]
			}
			if strings.HasPrefix(e.Job, "bat_") && e.State == batchCompleted {
				e.Batch, e.Job = e.Job, ""
				e.Items = mailItems(msg)
			}
		}
		out = append(out, e)
	}
	return out
}

// mailItems reads the jobs a batch's mail lists: one line per job, its id
// first and its state second (notifier.buildBatchMail), in a body that
// may be quoted-printable.
func mailItems(msg *mail.Message) []Item {
	var body io.Reader = msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(msg.Body)
	}
	text, err := io.ReadAll(body)
	if err != nil {
		return nil
	}
	var out []Item
	for line := range strings.Lines(string(text)) {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[0], "job_") {
			out = append(out, Item{ID: f[0], State: f[1]})
		}
	}
	return out
}
