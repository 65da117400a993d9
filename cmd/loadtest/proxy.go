package main

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// proxy is a TCP proxy in front of Redis that can "go down": while down it
// closes every connection it holds and every new one at once, as a Redis
// restart or a cut network would (connection refused or reset). It is the
// harness's own copy of internal/redistest's Proxy, which needs a
// testing.TB. It is safe for concurrent use.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and every pipe goroutine

	mu     sync.Mutex
	down   bool                  // guarded by mu
	closed bool                  // guarded by mu
	conns  map[net.Conn]struct{} // guarded by mu; every open connection, both sides
}

// newProxy starts a proxy on a free loopback port in front of target.
func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// addr returns the address clients dial.
func (p *proxy) addr() string { return p.ln.Addr().String() }

// setDown takes the proxy down (dropping every open connection) or up.
func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

// close stops accepting, drops every connection and waits for every
// goroutine of the proxy.
func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers c, or closes it and reports false when the proxy is down
// or closed.
func (p *proxy) track(c ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down || p.closed {
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

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) { // went down while dialing
			continue
		}
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			io.Copy(dst, src)
			p.untrack(dst)
			p.untrack(src)
		}
		p.wg.Add(2)
		go pipe(up, c)
		go pipe(c, up)
	}
}
