package redisserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// For returns the client options of the Redis every run uses, and a
// function that stops what For started (a no-op for a given URL). With
// rawURL empty it starts redis-server from PATH; without one it fails.
func For(ctx context.Context, rawURL string, stderr io.Writer) (*redis.Options, func() error, error) {
	if rawURL != "" {
		opts, err := redis.ParseURL(rawURL)
		if err != nil {
			// The URL may hold a password: do not repeat it.
			return nil, nil, errors.New("--redis-url / REDIS_URL: not a valid redis:// or rediss:// URL (Redis Cluster is not supported here)")
		}
		return opts, func() error { return nil }, nil
	}
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, nil, errors.New("no Redis: set --redis-url or REDIS_URL, or put redis-server on PATH " +
			"(Debian/Ubuntu: apt-get install redis-server) so that the command can start its own")
	}
	srv, err := Start(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(stderr, "loadtest: started %s on %s (data in %s)\n", path, srv.Addr, srv.Dir)
	return &redis.Options{Addr: srv.Addr}, srv.Stop, nil
}

// With calls f with the client options of For, and stops what For started
// after f returns, returning f's error, else the stop's.
func With(ctx context.Context, rawURL string, stderr io.Writer, f func(*redis.Options) error) (err error) {
	opts, stop, err := For(ctx, rawURL, stderr)
	if err != nil {
		return err
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	return f(opts)
}

// Server is a redis-server that Start started and that its caller must
// stop. It is not safe for concurrent use: only the goroutine that started
// it calls its methods.
type Server struct {
	Addr string // host:port on the loopback interface
	Dir  string // its temporary working directory, removed by Stop

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// Start starts redis-server at path on a free loopback port, without
// persistence, in a temporary directory, with flags after its own, and
// waits until it answers PING.
func Start(ctx context.Context, path string, flags ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "loadtest-redis-")
	if err != nil {
		return nil, fmt.Errorf("start redis: %w", err)
	}
	var lastErr error
	// The free port may be taken between the probe and redis-server's
	// bind: try a few.
	for range 5 {
		port, err := FreePort()
		if err != nil {
			lastErr = err
			continue
		}
		r := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir, exited: make(chan struct{})}
		args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}, flags...)
		r.cmd = exec.Command(path, args...)
		SetParentDeathSignal(r.cmd) // an outright kill of the parent takes redis-server along (Linux)
		if err := r.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		go func() { r.cmd.Wait(); close(r.exited) }() // ends when the process does; stop waits for it
		if lastErr = r.waitReady(ctx); lastErr == nil {
			return r, nil
		}
		r.kill()
		if ctx.Err() != nil {
			break
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
	os.RemoveAll(dir)
	if len(log) > 0 {
		return nil, fmt.Errorf("start redis-server: %w; its log:\n%s", lastErr, log)
	}
	return nil, fmt.Errorf("start redis-server: %w", lastErr)
}

// waitReady polls PING for up to 5 s.
func (r *Server) waitReady(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DisableIdentity: true})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		select {
		case <-r.exited:
			return fmt.Errorf("redis-server on %s exited at start", r.Addr)
		case <-ctx.Done():
			return fmt.Errorf("redis-server on %s did not answer PING: %w", r.Addr, err)
		case <-tick.C:
		}
	}
}

// Stop ends redis-server and removes its directory. It may be called more
// than once.
func (r *Server) Stop() error {
	r.kill()
	if err := os.RemoveAll(r.Dir); err != nil {
		return fmt.Errorf("stop redis: %w", err)
	}
	return nil
}

// kill ends redis-server (SIGTERM, then SIGKILL after 5 s) and waits for it.
func (r *Server) kill() {
	select {
	case <-r.exited:
	default:
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(5 * time.Second):
			r.cmd.Process.Kill()
			<-r.exited
		}
	}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
