package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Environment variables set by .ci/run.
const (
	EnvAddr    = "SMS_TEST_REDIS_ADDR"    // host:port of a standalone Redis
	EnvCluster = "SMS_TEST_REDIS_CLUSTER" // comma list of cluster seed host:ports
)

const howTo = `start one and export its address, for example:
    redis-server --port 6390 --save '' --daemonize yes && export %s=127.0.0.1:6390
or run the whole suite with: bash .ci/run`

// Addr returns the standalone Redis address, failing t if there is none.
func Addr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(EnvAddr)
	if addr == "" {
		t.Fatalf("this test needs a real Redis and %s is not set; "+howTo, EnvAddr, EnvAddr)
	}
	return addr
}

// ClusterAddrs returns the Redis Cluster seeds, failing t if there are none.
func ClusterAddrs(t testing.TB) []string {
	t.Helper()
	v := os.Getenv(EnvCluster)
	if v == "" {
		t.Fatalf("this test needs a real Redis Cluster and %s is not set; "+
			"run the suite with: bash .ci/run (it starts a cluster of 3 masters and 3 replicas on loopback)", EnvCluster)
	}
	return strings.Split(v, ",")
}

// Options returns client options for addr that honour context deadlines, as
// the admission limiter requires.
func Options(addr string) *redis.Options {
	return &redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DisableIdentity: true}
}

// Client returns a client of the standalone Redis, closed when t ends.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	return ClientOf(t, Addr(t))
}

// ClientOf returns a client of the Redis at addr, closed when t ends.
func ClientOf(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(Options(addr))
	t.Cleanup(func() { c.Close() })
	return c
}

// ClusterClient returns a client of the Redis Cluster, closed when t ends.
func ClusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: ClusterAddrs(t), ContextTimeoutEnabled: true, DisableIdentity: true,
	})
	t.Cleanup(func() { c.Close() })
	if err := c.ForEachShard(context.Background(), func(ctx context.Context, s *redis.Client) error {
		return s.Ping(ctx).Err()
	}); err != nil {
		t.Fatalf("redis cluster at %s: %v", os.Getenv(EnvCluster), err)
	}
	return c
}

// Private starts a redis-server of t's own from PATH, on a Unix socket in
// a test directory (no port to race for), and returns the socket's path;
// the server stops when t ends. For a test that reads or resets the
// server's own figures (INFO commandstats, CONFIG RESETSTAT), which the
// shared test Redis cannot give: other packages' tests use it meanwhile.
func Private(t testing.TB) (socket string) {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("this test needs redis-server on PATH (Debian: apt-get install redis-server; bash .ci/run installs it)")
	}
	dir := t.TempDir()
	socket = filepath.Join(dir, "redis.sock")
	cmd := exec.Command(path, "--port", "0", "--unixsocket", socket, "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: socket, MaxRetries: -1, DisableIdentity: true})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return socket
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer PING: %v", socket, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// UniqueAccount returns an account name no other test uses, so tests share
// one Redis without flushing it.
func UniqueAccount(t testing.TB) string {
	n := seq.Add(1)
	name := strings.NewReplacer("/", "-", " ", "_", "{", "", "}", "").Replace(t.Name())
	return fmt.Sprintf("%s-%d-%d", name, os.Getpid(), n)
}

var seq atomic.Int64

// A Recorder is a go-redis hook that counts and records the commands a
// client sends. It is safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	cmds [][]any // guarded by mu
}

var _ redis.Hook = (*Recorder)(nil)

func (r *Recorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *Recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.mu.Lock()
		r.cmds = append(r.cmds, append([]any(nil), cmd.Args()...))
		r.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (r *Recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.mu.Lock()
		for _, cmd := range cmds {
			r.cmds = append(r.cmds, append([]any(nil), cmd.Args()...))
		}
		r.mu.Unlock()
		return next(ctx, cmds)
	}
}

// Len returns how many commands were sent, leaving out the handshake a
// client sends on each new connection (HELLO, CLIENT, AUTH, SELECT).
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, args := range r.cmds {
		if name, _ := args[0].(string); !handshake[strings.ToLower(name)] {
			n++
		}
	}
	return n
}

var handshake = map[string]bool{"hello": true, "client": true, "auth": true, "select": true}

// Commands returns the arguments of every command sent, oldest first.
func (r *Recorder) Commands() [][]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]any(nil), r.cmds...)
}

// Reset forgets the commands recorded so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.cmds = nil
	r.mu.Unlock()
}
