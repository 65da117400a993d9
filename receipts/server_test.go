package receipts

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"smsdispatcher/internal/pipenet"
)

func TestCallbackURL(t *testing.T) {
	for _, tt := range []struct{ public, account, want string }{
		{"https://r.example.com", "twilio-main", "https://r.example.com/v1/receipts/twilio-main"},
		{"https://r.example.com/", "a", "https://r.example.com/v1/receipts/a"},
		{"https://r.example.com/sms", "a b", "https://r.example.com/sms/v1/receipts/a%20b"},
	} {
		if got := CallbackURL(tt.public, tt.account); got != tt.want {
			t.Errorf("CallbackURL(%q, %q) = %q, want %q", tt.public, tt.account, got, tt.want)
		}
	}
}

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	reader, ledger, pub := &testReader{}, newTestLedger(), testPublisher{"t", &publishLog{}}
	good := func() Config {
		return Config{PublicURL: testPublicURL, Accounts: []Account{{"a", reader, ledger}}, Status: pub, Resend: pub, Deadline: payloadDeadline}
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // in the error
	}{
		{"relative public URL", func(c *Config) { c.PublicURL = "receipts.example.com" }, "not an absolute URL"},
		{"no account", func(c *Config) { c.Accounts = nil }, "no account"},
		{"no status publisher", func(c *Config) { c.Status = nil }, "publisher"},
		{"no resend publisher", func(c *Config) { c.Resend = nil }, "publisher"},
		{"no reader of a resend's deadline", func(c *Config) { c.Deadline = nil }, "deadline"},
		{"no reader", func(c *Config) { c.Accounts[0].Reader = nil }, `"a" needs`},
		{"no ledger", func(c *Config) { c.Accounts[0].Ledger = nil }, `"a" needs`},
		{"an account twice", func(c *Config) { c.Accounts = append(c.Accounts, c.Accounts[0]) }, `"a" twice`},
	}
	for _, tt := range tests {
		cfg := good()
		tt.change(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.want)
		}
	}
	if _, err := New(good()); err != nil {
		t.Errorf("a complete config: %v", err)
	}
}

// TestRunListensOnAddr runs on a free port, answers a receipt there and
// returns nil once ctx ends; an address it cannot listen on is an error.
func TestRunListensOnAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := newRig(t)
	r.srv.cfg.Addr = addr
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.srv.Run(ctx) }()
	var resp *http.Response
	for range 100 {
		if resp, err = http.Post("http://"+addr+"/v1/receipts/acct", "text/plain", strings.NewReader("x")); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an unsigned receipt: %d, want 403", resp.StatusCode)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()

	r.srv.cfg.Addr = addr + "0"
	if err := r.srv.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "RECEIPTS_ADDR") {
		t.Errorf("Run on %s: %v, want an error naming RECEIPTS_ADDR", r.srv.cfg.Addr, err)
	}
}

// TestRunFinishesReceiptsInFlight ends Run's context while a receipt is
// being folded: Run waits for it, the provider gets its 200, and the
// event it published is cleared in Redis before Run returns.
func TestRunFinishesReceiptsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.ledger.add("m1", "pid-1", "otp", time.Now(), nil)
		r.ledger.block = make(chan struct{})
		ln := pipenet.New()
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- r.srv.serve(ctx, ln) }()

		body := "pid-1 delivered"
		c := ln.Dial()
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/receipts/acct HTTP/1.1\r\nHost: x\r\nX-Test-Signature: %s\r\nContent-Length: %d\r\n\r\n%s",
			testSign(r.reader.secret, CallbackURL(testPublicURL, "acct"), []byte(body)), len(body), body)
		answered := make(chan int, 1)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answered <- 0
				return
			}
			resp.Body.Close()
			answered <- resp.StatusCode
		}()
		synctest.Wait() // the receipt waits in the ledger
		cancel()
		synctest.Wait()
		select {
		case err := <-ran:
			t.Fatalf("Run returned (%v) with a receipt in flight", err)
		default:
		}
		close(r.ledger.block)
		if code := <-answered; code != http.StatusOK {
			t.Errorf("the receipt in flight: %d, want 200", code)
		}
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
		if owed, marked, flushes := r.ledger.state(); len(owed) != 0 || len(marked) != 1 || flushes != 1 {
			t.Errorf("at Run's return: owed %q, marked %q, %d flushes; want m1 published and cleared", owed, marked, flushes)
		}
	})
}

// TestSweepPublishesABacklogInBatches leaves 250 events owed: one sweep
// publishes each once, clearing each batch before reading the next.
func TestSweepPublishesABacklogInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		for i := range 250 {
			id := fmt.Sprintf("m%03d", i)
			r.ledger.add(id, "p"+id, "otp", time.Now(), nil)
			r.ledger.owedSince[id] = time.Now()
		}
		time.Sleep(owedAge)
		r.srv.sweep(context.Background(), r.srv.accounts["acct"])
		msgs, _ := r.pubs.get()
		seen := map[string]int{}
		for _, m := range msgs {
			seen[m.attrs["id"]]++
		}
		owed, marked, flushes := r.ledger.state()
		if len(msgs) != 250 || len(seen) != 250 || len(owed) != 0 || len(marked) != 250 || flushes != 3 {
			t.Errorf("published %d (%d ids), %d still owed, %d marked, %d flushes; want 250 once each, none owed, 3 flushes",
				len(msgs), len(seen), len(owed), len(marked), flushes)
		}
	})
}

// TestSweepStopsAtAFailure leaves 250 events owed while Pub/Sub fails:
// the sweep tries one batch, marks nothing, and leaves the rest to the
// next sweep.
func TestSweepStopsAtAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		for i := range 250 {
			id := fmt.Sprintf("m%03d", i)
			r.ledger.add(id, "p"+id, "otp", time.Now(), nil)
			r.ledger.owedSince[id] = time.Now()
		}
		r.pubs.setFailing(true)
		time.Sleep(owedAge)
		start := time.Now()
		// Cut at a minute: an unbounded publish would retry for ever.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r.srv.sweep(ctx, r.srv.accounts["acct"])
		if d := time.Since(start); d > r.srv.publishBound+time.Second {
			t.Errorf("the sweep took %v, want about the publish bound %v", d, r.srv.publishBound)
		}
		owed, marked, _ := r.ledger.state()
		if len(owed) != 250 || len(marked) != 0 {
			t.Errorf("%d owed, %d marked: want all owed, none marked", len(owed), len(marked))
		}
	})
}

// TestHTTPServerClosesIdleAndStuckConnections holds connections the way
// a stuck or hostile client would and sees each closed by the server at
// its limit, on synctest's clock; and refuses headers over the limit.
func TestHTTPServerClosesIdleAndStuckConnections(t *testing.T) {
	tests := []struct {
		name  string
		send  string        // what the client writes, then it holds the connection
		read  bool          // whether it reads the answer before holding
		limit time.Duration // the limit that must close it
	}{
		{"idle keep-alive after a request", "POST /v1/receipts/acct HTTP/1.1\r\nHost: r\r\nContent-Length: 1\r\n\r\nx", true, httpIdleTimeout},
		{"headers never finished", "POST /v1/receipts/acct HTTP/1.1\r\nHost: r\r\n", false, httpReadHeaderTimeout},
		{"body never finished", "POST /v1/receipts/acct HTTP/1.1\r\nHost: r\r\nContent-Length: 100\r\n\r\nabc", false, httpReadTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newHTTPServer(newRig(t).srv.Handler())
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
				// Held: reading ends when the server closes the
				// connection, or at the client's own deadline.
				c.SetReadDeadline(time.Now().Add(2 * tt.limit))
				io.Copy(io.Discard, br)
				if held := time.Since(start); held < tt.limit || held >= 2*tt.limit {
					t.Errorf("connection closed after %v, want at %v", held, tt.limit)
				}
			})
		})
	}
	t.Run("headers over the limit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := newHTTPServer(newRig(t).srv.Handler())
			ln := pipenet.New()
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			c := ln.Dial()
			defer func() {
				c.Close()
				srv.Close()
				<-served
				time.Sleep(time.Second) // the connection's goroutine lingers half a second after its answer
			}()
			go fmt.Fprintf(c, "POST /v1/receipts/acct HTTP/1.1\r\nHost: r\r\nX-Big: %s\r\n\r\n", strings.Repeat("x", httpMaxHeaderBytes+8192))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("%d, want 431", resp.StatusCode)
			}
		})
	})
}
