package chaos

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/jobtest"
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

// delivered reports whether a change of job to state was delivered.
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
		var res struct {
			ID      string `json:"id"`
			State   string `json:"state"`
			Attempt int    `json:"attempt"`
		}
		if json.Unmarshal(p.Data, &res) == nil {
			e.Job, e.State, e.Attempt = res.ID, res.State, res.Attempt
		}
	}
	s.mu.Lock()
	fail := s.rng.IntN(100) < s.failPct
	s.count++
	e.Status = http.StatusNoContent
	if fail {
		e.Status = http.StatusServiceUnavailable
	} else if e.Job != "" {
		if s.ok[e.Job] == nil {
			s.ok[e.Job] = map[string]bool{}
		}
		s.ok[e.Job][e.State] = true
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
// notifier's Message-ID is <job>.<state>@jobgate.
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
		}
		out = append(out, e)
	}
	return out
}
