package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Mode is how a Proxy treats connections.
type Mode int

const (
	Up        Mode = iota // forward to the target
	Refuse                // close every connection at once: "connection reset"
	Blackhole             // accept and never answer: the client times out
)

// A Proxy is a TCP proxy in front of a Redis that a test can take down. It
// is safe for concurrent use and is closed, with all its goroutines waited
// for, when the test ends.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	mode  Mode                  // guarded by mu
	conns map[net.Conn]struct{} // guarded by mu; every open connection, both sides
}

// NewProxy starts a proxy on a free loopback port in front of target.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
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

func (p *Proxy) close() {
	p.ln.Close()
	p.SetMode(Refuse)
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
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
			return
		}
		p.mu.Lock()
		mode := p.mode
		p.mu.Unlock()
		switch mode {
		case Refuse:
			c.Close()
		case Blackhole:
			p.track(c)
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
			p.track(c)
			p.track(up)
			p.wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer p.wg.Done()
				io.Copy(dst, src)
				p.untrack(dst)
				p.untrack(src)
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}
}
