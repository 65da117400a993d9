package redistest

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Mode is how a Proxy treats connections.
type Mode int

const (
	Up        Mode = iota // forward to the target
	Refuse                // close every connection at once: "connection reset"
	Blackhole             // accept and never answer: the client times out
)

// A Proxy is a TCP proxy in front of a Redis that a test (or the load
// harness) can take down. It is safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and every connection's goroutines

	mu     sync.Mutex
	mode   Mode                  // guarded by mu
	delay  time.Duration         // guarded by mu; added to every reply in mode Up
	closed bool                  // guarded by mu
	conns  map[net.Conn]struct{} // guarded by mu; every open connection, both sides
}

// NewProxy starts a proxy on a free loopback port in front of target; it is
// closed, with all its goroutines waited for, when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// StartProxy starts a proxy on a free loopback port in front of target. The
// caller must Close it.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetMode switches the proxy to m and drops every open connection, as a
// Redis restart or a network cut would.
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	p.mode = m
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// SetDelay holds every reply of the target for d before passing it on, as
// a slow network or a busy Redis would; zero ends it. Connections stay
// open.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

func (p *Proxy) replyDelay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// Close stops accepting, drops every connection and waits for every
// goroutine of the proxy.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers c, taken in mode want, or closes it and reports false
// when the mode changed meanwhile (while dialing the target) or the proxy
// is closed.
func (p *Proxy) track(want Mode, c ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.mode != want {
		for _, x := range c {
			x.Close()
		}
		return false
	}
	for _, x := range c {
		p.conns[x] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		mode := p.mode
		p.mu.Unlock()
		switch mode {
		case Refuse:
			c.Close()
		case Blackhole:
			if !p.track(Blackhole, c) {
				continue
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer p.untrack(c)
				io.Copy(io.Discard, c)
			}()
		case Up:
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			if !p.track(Up, c, up) {
				continue
			}
			pipe := func(dst, src net.Conn, delayed bool) {
				defer p.wg.Done()
				if delayed {
					p.copyDelayed(dst, src)
				} else {
					io.Copy(dst, src)
				}
				p.untrack(dst)
				p.untrack(src)
			}
			p.wg.Add(2)
			go pipe(up, c, false)
			go pipe(c, up, true)
		}
	}
}

// copyDelayed copies src to dst, holding each read for the delay in force.
func (p *Proxy) copyDelayed(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := p.replyDelay(); d > 0 {
				time.Sleep(d) // the fault itself, not a wait for an event
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
