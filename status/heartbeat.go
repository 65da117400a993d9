package status

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"time"

	"smsdispatcher/admission"
)

// heartbeatEvery is how often a process tells Redis it is alive, and in
// what state, on each account.
const heartbeatEvery = time.Second

// Heartbeats beats as process id, of the given version, on each limiter's
// account every heartbeatEvery until ctx ends; it returns then. A beat
// that fails (Redis down) is skipped: the process shows silent.
func Heartbeats(ctx context.Context, id, version string, lims []*admission.Limiter) {
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	host, _ := os.Hostname()
	for {
		for _, lim := range lims {
			_ = lim.Heartbeat(ctx, id, state(lim.Mode(), host, version))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// state is a heartbeat's state: "<mode> <host> <version>", which
// parseState reads.
func state(mode, host, version string) string {
	return mode + " " + strings.ReplaceAll(host, " ", "_") + " " + version
}

// parseState reads a heartbeat's state; ok is false if it has another
// shape.
func parseState(s string) (mode, host, version string, ok bool) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return "", "", "", false
	}
	return f[0], f[1], f[2], true
}

// ProcessID names this process in its heartbeats: the host (the pod's
// name) and a random suffix, unique among restarts.
func ProcessID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "dispatcher"
	}
	var b [3]byte
	rand.Read(b[:])
	return strings.ReplaceAll(host, " ", "_") + "-" + hex.EncodeToString(b[:])
}
