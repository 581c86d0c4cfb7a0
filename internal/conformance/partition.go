package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stretchr/testify/require"
)

// partition is a TCP proxy between a worker process and the deployment's
// NATS server that a scenario can cut: from cut until heal no byte goes
// either way, so the worker's requests go unanswered while its connection
// stays up, as in a network partition. The deployment, which other
// scenarios share, goes on. Heal resets the connections, dropping what was
// held (the worker reconnects): requests held that long would reach
// jobgate after their asker gave up on them (a next could claim a job for
// no one). It reads the NATS protocol both ways: what the worker
// published, when it reached the proxy (whether or not it went on), and
// the replies delivered to the worker.
type partition struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	wake      *sync.Cond
	held      int // bytes read and not yet passed on, all links
	isCut     bool
	closed    bool
	conns     []net.Conn
	published []published
	delivered map[string][]byte // reply subject: the payload delivered to the worker
}

// maxHeld bounds the bytes the proxy holds (while cut, or while a side is
// slow): past it, it reads no more until some are passed on, as a TCP
// window would. maxPayload bounds a message the protocol reader accepts;
// a bigger one ends the reading (the bytes still pass).
const (
	maxHeld    = 8 << 20
	maxPayload = 8 << 20
)

// published is a PUB or HPUB of the worker's.
type published struct {
	subject, reply string
	at             time.Time
}

func newPartition(t T, natsURL string) *partition {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &partition{ln: ln, target: strings.TrimPrefix(natsURL, "nats://"), delivered: map[string][]byte{}}
	p.wake = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *partition) url() string { return "nats://" + p.ln.Addr().String() }

func (p *partition) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.link(c, s, true)
		go p.link(s, c, false)
	}
}

// link copies src to dst, holding what it reads while the partition is
// cut; the worker's side (up) is parsed as it is read, the server's as it
// is delivered.
func (p *partition) link(src, dst net.Conn, up bool) {
	pr, pw := io.Pipe()
	if up {
		go p.parse(pr, p.notePublished)
	} else {
		go p.parse(pr, p.noteDelivered)
	}
	defer pw.Close()
	var queue [][]byte
	eof, done := false, false
	defer func() {
		// What this link still holds is dropped with it.
		p.mu.Lock()
		done = true
		for _, d := range queue {
			p.held -= len(d)
		}
		queue = nil
		p.wake.Broadcast()
		p.mu.Unlock()
	}()
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				data := bytes.Clone(buf[:n])
				if up {
					_, _ = pw.Write(data)
				}
				p.mu.Lock()
				if done {
					p.mu.Unlock()
					return
				}
				queue = append(queue, data)
				p.held += n
				p.wake.Broadcast()
				for p.held > maxHeld && !p.closed && !done {
					p.wake.Wait()
				}
				p.mu.Unlock()
			}
			if err != nil {
				p.mu.Lock()
				eof = true
				p.wake.Broadcast()
				p.mu.Unlock()
				return
			}
		}
	}()
	for {
		p.mu.Lock()
		for !p.closed && (p.isCut || len(queue) == 0) && !(eof && len(queue) == 0) {
			p.wake.Wait()
		}
		if p.closed || len(queue) == 0 {
			p.mu.Unlock()
			src.Close()
			dst.Close()
			return
		}
		data := queue[0]
		queue = queue[1:]
		p.held -= len(data)
		p.wake.Broadcast()
		p.mu.Unlock()
		if _, err := dst.Write(data); err != nil {
			src.Close()
			return
		}
		if !up {
			_, _ = pw.Write(data)
		}
	}
}

// parse reads NATS protocol operations, calling note with the arguments
// and payload of each PUB, HPUB, MSG and HMSG.
func (p *partition) parse(r io.Reader, note func(op string, args []string, payload []byte)) {
	br := bufio.NewReaderSize(r, 64<<10)
	defer io.Copy(io.Discard, br) //nolint:errcheck // keeps the link's writes from blocking
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		op := strings.ToUpper(f[0])
		switch op {
		case "PUB", "HPUB", "MSG", "HMSG":
		default:
			continue
		}
		n, err := strconv.Atoi(f[len(f)-1])
		if err != nil || n < 0 || n > maxPayload {
			return
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		payload := body[:n]
		if op == "HPUB" || op == "HMSG" {
			h, err := strconv.Atoi(f[len(f)-2])
			if err != nil || h > n {
				return
			}
			payload = payload[h:]
			f = f[:len(f)-1]
		}
		note(op, f[1:len(f)-1], payload)
	}
}

// notePublished: PUB <subject> [reply] <size>.
func (p *partition) notePublished(_ string, args []string, _ []byte) {
	m := published{subject: args[0], at: time.Now()}
	if len(args) > 1 {
		m.reply = args[1]
	}
	p.mu.Lock()
	p.published = append(p.published, m)
	p.mu.Unlock()
}

// noteDelivered: MSG <subject> <sid> [reply] <size>.
func (p *partition) noteDelivered(_ string, args []string, payload []byte) {
	p.mu.Lock()
	p.delivered[args[0]] = bytes.Clone(payload)
	p.mu.Unlock()
}

// leased is a request of the worker's answered with a lease: when it
// reached the proxy, and the lease_ms of its answer.
type leased struct {
	op    string // beat, or next for an assignment
	at    time.Time
	lease time.Duration
}

// leases are the worker's beats answered ok and the assignments delivered
// to it, with their leases, in the order they were sent.
func (p *partition) leases() []leased {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []leased
	for _, m := range p.published {
		op := m.subject[strings.LastIndexByte(m.subject, '.')+1:]
		raw, ok := p.delivered[m.reply]
		if m.reply == "" || !ok || (op != "beat" && op != "next") {
			continue
		}
		var reply struct {
			Error   json.RawMessage `json:"error"`
			LeaseMS int64           `json:"lease_ms"`
			Job     *struct {
				LeaseMS int64 `json:"lease_ms"`
			} `json:"job"`
		}
		if json.Unmarshal(raw, &reply) != nil || reply.Error != nil {
			continue
		}
		lease := reply.LeaseMS
		if op == "next" {
			if reply.Job == nil {
				continue
			}
			lease = reply.Job.LeaseMS
		}
		out = append(out, leased{op: op, at: m.at, lease: time.Duration(lease) * time.Millisecond})
	}
	return out
}

// sent are the worker's requests of these ops (done, fail, giveback...)
// published since, delivered or held.
func (p *partition) sent(since time.Time, ops ...string) []published {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []published
	for _, m := range p.published {
		if !m.at.Before(since) && slices.Contains(ops, m.subject[strings.LastIndexByte(m.subject, '.')+1:]) {
			out = append(out, m)
		}
	}
	return out
}

// cut stops every byte, both ways.
func (p *partition) cut() {
	p.mu.Lock()
	p.isCut = true
	p.mu.Unlock()
}

// heal drops the connections and what they held; new ones go through.
func (p *partition) heal() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	p.mu.Lock()
	p.isCut = false
	p.wake.Broadcast()
	p.mu.Unlock()
}

func (p *partition) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.wake.Broadcast()
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
}
