package gateway

import (
	"io"
	"net"
	"time"
)

// Bounds of a lingering close: how long and how much of a client's unread
// request the gateway still swallows after answering it.
const (
	lingerTimeout = time.Second
	lingerMax     = 4 << 20
)

// lingerListener makes every close of a client connection a lingering
// close, as Go's net/http server does. fasthttp answers a body over the
// transport limit with 413 and closes at once, without reading the body;
// closing a socket with unread input makes the kernel send a reset, which
// destroys the 413 before the client reads it ("connection reset by peer"
// instead of a problem). Half-closing first and draining what still arrives,
// bounded in time and bytes and without keeping it, lets the answer through.
type lingerListener struct{ net.Listener }

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		return &lingerConn{TCPConn: tc}, nil
	}
	return c, nil
}

type lingerConn struct{ *net.TCPConn }

// Close sends FIN at once and releases the socket once the client has
// closed its side, stopped sending, or used up the bounds.
func (c *lingerConn) Close() error {
	if err := c.TCPConn.CloseWrite(); err != nil {
		return c.TCPConn.Close()
	}
	go func() {
		_ = c.TCPConn.SetReadDeadline(time.Now().Add(lingerTimeout))
		_, _ = io.CopyN(io.Discard, c.TCPConn, lingerMax)
		_ = c.TCPConn.Close()
	}()
	return nil
}
