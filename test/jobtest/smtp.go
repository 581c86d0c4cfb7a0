package jobtest

import (
	"fmt"
	"io"
	"net"
	"net/mail"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"
)

// SMTPSink is a real SMTP server on loopback that keeps every mail it
// accepts, duplicates included, so tests can count notices.
type SMTPSink struct {
	Host string
	Port int
	// RejectMail answers this many MAIL FROM commands with 451 first.
	RejectMail atomic.Int32

	mu    sync.Mutex
	mails []Mail
}

// Mail is one accepted message.
type Mail struct {
	From string
	To   []string
	Data string
}

// NewSMTPSink starts a sink that stops when the test ends.
func NewSMTPSink(t testing.TB) *SMTPSink {
	t.Helper()
	s, stop, err := ServeSMTPSink()
	require.NoError(t, err)
	t.Cleanup(func() { _ = stop() })
	return s
}

// ServeSMTPSink starts a sink outside a test's lifetime (the chaos
// harness runs one from a command); stop closes it and waits for it.
func ServeSMTPSink() (s *SMTPSink, stop func() error, err error) {
	s = &SMTPSink{}
	srv := smtp.NewServer(sinkBackend{s})
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("smtp sink: %w", err)
	}
	addr := l.Addr().(*net.TCPAddr)
	s.Host, s.Port = addr.IP.String(), addr.Port
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	return s, func() error { err := srv.Close(); <-done; return err }, nil
}

// Received returns a copy of every accepted mail, in arrival order.
func (s *SMTPSink) Received() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

// MessageIDs counts the accepted mails per Message-ID (without <>).
func (s *SMTPSink) MessageIDs() map[string]int {
	out := map[string]int{}
	for _, m := range s.Received() {
		id := ""
		if msg, err := mail.ReadMessage(strings.NewReader(m.Data)); err == nil {
			id = strings.Trim(msg.Header.Get("Message-Id"), "<>")
		}
		out[id]++
	}
	return out
}

type sinkBackend struct{ s *SMTPSink }

func (b sinkBackend) NewSession(*smtp.Conn) (smtp.Session, error) { return &sinkSession{s: b.s}, nil }

type sinkSession struct {
	s    *SMTPSink
	from string
	to   []string
}

func (ss *sinkSession) Mail(from string, _ *smtp.MailOptions) error {
	if ss.s.RejectMail.Add(-1) >= 0 {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	}
	ss.from = from
	return nil
}

func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.to = append(ss.to, to)
	return nil
}

func (ss *sinkSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.s.mu.Lock()
	ss.s.mails = append(ss.s.mails, Mail{From: ss.from, To: ss.to, Data: string(data)})
	ss.s.mu.Unlock()
	return nil
}

func (ss *sinkSession) Reset()        { ss.from, ss.to = "", nil }
func (ss *sinkSession) Logout() error { return nil }
