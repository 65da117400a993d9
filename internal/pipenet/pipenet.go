// Package pipenet is a net.Listener over net.Pipe connections, for tests:
// an HTTP server on it runs inside a synctest bubble, on its fake clock.
package pipenet

import (
	"net"
	"sync"
)

// Listener hands its Accept the server ends of the connections Dial makes.
type Listener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

// New returns a Listener with no connection yet.
func New() *Listener {
	return &Listener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept returns the server end of the next Dial, or net.ErrClosed once
// the Listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close ends Accept; it may be called more than once.
func (l *Listener) Close() error { l.once.Do(func() { close(l.done) }); return nil }

// Addr is "pipe".
func (l *Listener) Addr() net.Addr { return addr{} }

// Dial returns the client end of a new connection to the server, once
// the server accepts it.
func (l *Listener) Dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

type addr struct{}

func (addr) Network() string { return "pipe" }
func (addr) String() string  { return "pipe" }
