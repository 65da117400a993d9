package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/config"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider/providertest"
)

// loadConfig parses args and env as a command does, without the process
// environment.
func loadConfig(env map[string]string, args ...string) (config.Settings, error) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	load := config.Flags(fs, config.All, func(k string) string { return env[k] })
	if err := fs.Parse(args); err != nil {
		return config.Settings{}, err
	}
	return load()
}

// writeFile writes content to a new file in a test directory and returns
// its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServeRejectsAnInvalidTokenFromAFile: a token the HTTP header cannot
// carry stops serve with an error naming the file's variable, without the
// token.
func TestServeRejectsAnInvalidTokenFromAFile(t *testing.T) {
	t.Setenv("SMS_PROVIDER_URL", "http://127.0.0.1:1")
	t.Setenv("REDIS_URL", "redis://127.0.0.1:1")
	t.Setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1") // clients dial lazily: nothing is reached
	t.Setenv("SMS_PROVIDER_TOKEN", "")
	t.Setenv("SMS_PROVIDER_TOKEN_FILE", writeFile(t, "tok", "s3cret with-a-space\n"))
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	err := run(context.Background(), []string{"serve"}, io.Discard, io.Discard)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Env != "SMS_PROVIDER_TOKEN_FILE" {
		t.Fatalf("serve: %v, want a configuration error naming SMS_PROVIDER_TOKEN_FILE", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %q holds the token", err)
	}
}

// TestServeWithTokenFileLeaksNothing runs the real binary's serve with the
// token in a mounted file and spans written to the console exporter, has
// it send one message and dead-letter one whose provider answer echoes the
// token, the number and the body, then greps everything the process wrote
// (logs on stderr, spans on stdout) for the token, numbers and bodies.
func TestServeWithTokenFileLeaksNothing(t *testing.T) {
	const (
		token  = "file-t0ken-8c1f37"
		number = "+819012345678"
		body   = "Your code is 482913"
	)
	ps := pstest.NewServer()
	defer ps.Close()
	sim := providertest.NewGeneric(providertest.Config{Token: token})
	// A careless provider that echoes what it was sent in its refusal.
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "echo-refused" {
			b, _ := io.ReadAll(r.Body)
			http.Error(w, `{"error":"refused `+string(b)+` with `+r.Header.Get("Authorization")+`"}`, http.StatusUnprocessableEntity)
			return
		}
		sim.ServeHTTP(w, r)
	})
	simSrv := httptest.NewServer(echo)
	defer simSrv.Close()

	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	t.Setenv("PUBSUB_PROJECT_ID", "proj")
	ctx := context.Background()
	if err := run(ctx, []string{"setup"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("setup: %v", err)
	}

	env := []string{"DISPATCHER_RUN_MAIN=1"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SMS_") && !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "REDIS_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"REDIS_URL=redis://"+redistest.Addr(t), "SMS_ACCOUNT="+redistest.UniqueAccount(t),
		"SMS_PROVIDER_URL="+simSrv.URL, "SMS_PROVIDER_TOKEN_FILE="+writeFile(t, "token", token+"\n"),
		"HTTP_ADDR="+freeAddr(t), "OTEL_TRACES_EXPORTER=console",
	)
	cmd := exec.Command(os.Args[0], "serve")
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
	}()

	for _, id := range []string{"file-1", "echo-refused"} {
		if err := run(ctx, []string{"publish", "--class", "otp", "--to", number, "--body", body, "--id", id}, io.Discard, io.Discard); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
	}
	// The simulator accepts only the file's token: a send proves it was read.
	waitFor(t, func() bool { return sim.SentCount("file-1") == 1 })
	dead := pullOne(t, "sms-dead-letter-inspect")
	if dead == nil {
		t.Fatal("the refused message was not dead-lettered")
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v, want exit 0; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit within 30s of SIGTERM")
	}

	if !strings.Contains(stderr.String(), "dispatcher serving") || !strings.Contains(stdout.String(), "process sms-otp-dispatcher") {
		t.Fatalf("nothing to check: want the serving log line and delivery spans\nstderr:\n%s\nstdout:\n%.2000s", stderr.String(), stdout.String())
	}
	out := map[string]string{"logs": stderr.String(), "spans": stdout.String(), "reject_reason": dead.Attributes["reject_reason"]}
	for where, text := range out {
		for _, secret := range []string{token, number[1:], number[3:], body, "482913"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s hold %q", where, secret)
			}
		}
	}
	if !strings.Contains(out["reject_reason"], "[redacted]") {
		t.Errorf("reject_reason %q: want the echoed token redacted", out["reject_reason"])
	}
}

// pullOne returns the first message of the subscription of project "proj"
// on the Pub/Sub at PUBSUB_EMULATOR_HOST, or nil after 30s.
func pullOne(t *testing.T, subscription string) *pubsub.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := topology.NewClient(ctx, "proj", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got *pubsub.Message
	var once sync.Once
	err = c.Subscriber(subscription).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		once.Do(func() { got = m; cancel() })
	})
	if err != nil {
		t.Fatalf("receive %s: %v", subscription, err)
	}
	return got
}
