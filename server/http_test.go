package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener hands the server the server ends of net.Pipe connections,
// so that the HTTP server runs inside a synctest bubble, on its fake clock.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error { l.once.Do(func() { close(l.done) }); return nil }

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial returns the client end of a new connection to the server.
func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// TestHTTPServerClosesIdleAndStuckConnections holds connections to the
// server of /healthz, /readyz and /metrics the way a stuck or hostile
// client would (a keep-alive connection left idle after a request, one
// that sends half a request, one that never reads its answer) and sees
// each closed by the server, on synctest's clock: none holds a goroutine
// and a socket of the pod for ever.
func TestHTTPServerClosesIdleAndStuckConnections(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	srvHandler := http.NewServeMux()
	srvHandler.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	srvHandler.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) })
	srvHandler.HandleFunc("POST /body", func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })

	tests := []struct {
		name  string
		send  string        // what the client writes, then it holds the connection
		read  bool          // whether it reads the answer before holding
		limit time.Duration // the limit that must close it
	}{
		{"idle keep-alive after a request", "GET /healthz HTTP/1.1\r\nHost: pod\r\n\r\n", true, httpIdleTimeout},
		{"headers never finished", "GET /healthz HTTP/1.1\r\nHost: pod\r\n", false, httpReadHeaderTimeout},
		{"body never finished", "POST /body HTTP/1.1\r\nHost: pod\r\nContent-Length: 100\r\n\r\nabc", false, httpReadTimeout},
		{"answer never read", "GET /metrics HTTP/1.1\r\nHost: pod\r\n\r\n", false, httpWriteTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newHTTPServer(srvHandler)
				ln := newPipeListener()
				served := make(chan error, 1)
				go func() { served <- srv.Serve(ln) }()
				defer func() {
					srv.Close()
					if err := <-served; !errors.Is(err, http.ErrServerClosed) {
						t.Errorf("Serve: %v", err)
					}
				}()

				c := ln.dial()
				defer c.Close()
				start := time.Now()
				if _, err := io.WriteString(c, tt.send); err != nil {
					t.Fatalf("write: %v", err)
				}
				br := bufio.NewReader(c)
				if tt.read {
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatalf("read answer: %v", err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					start = time.Now()
				}
				// Held: reading ends when the server closes the connection
				// (without the limit, never: synctest reports the bubble
				// deadlocked, or the client's own deadline at twice the
				// limit ends it).
				c.SetReadDeadline(time.Now().Add(2 * tt.limit))
				if tt.limit == httpWriteTimeout {
					time.Sleep(tt.limit + time.Second) // not reading, on the fake clock
				}
				io.Copy(io.Discard, br)
				held := time.Since(start)
				if held < tt.limit || held >= 2*tt.limit {
					t.Errorf("connection closed after %v, want at %v", held, tt.limit)
				}
			})
		})
	}
}

// TestHTTPServerRefusesHugeHeaders: a request whose headers pass
// httpMaxHeaderBytes gets 431 instead of being read into memory.
func TestHTTPServerRefusesHugeHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newHTTPServer(http.NewServeMux())
		ln := newPipeListener()
		go srv.Serve(ln)
		c := ln.dial()
		defer func() {
			c.Close()
			srv.Close()
			time.Sleep(time.Second) // the server's connection lingers 500ms after a refusal
		}()
		go io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: pod\r\nX-Pad: "+strings.Repeat("a", 2*httpMaxHeaderBytes)+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("read answer: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, want 431", resp.StatusCode)
		}
	})
}
