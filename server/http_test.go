package server

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"smsdispatcher/internal/pipenet"
)

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
				srv := NewHTTPServer(srvHandler)
				ln := pipenet.New()
				served := make(chan error, 1)
				go func() { served <- srv.Serve(ln) }()
				defer func() {
					srv.Close()
					if err := <-served; !errors.Is(err, http.ErrServerClosed) {
						t.Errorf("Serve: %v", err)
					}
				}()

				c := ln.Dial()
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
		srv := NewHTTPServer(http.NewServeMux())
		ln := pipenet.New()
		go srv.Serve(ln)
		c := ln.Dial()
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
