package status

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"smsdispatcher/admission"
)

// heartbeatEvery is how often a process tells Redis it is alive, and in
// what state on each of its accounts.
const heartbeatEvery = time.Second

// Denied is what a process tells of its denials in its heartbeat: by
// account, then class, the deliveries it nacked for want of a send slot
// (the outcome denied, its sms_messages_total{outcome="denied"}) since it
// started. The counts only grow; a process that ends takes them with it.
type Denied map[string]map[string]int64

// Heartbeats beats on r as process id, of the given version, every
// heartbeatEvery until ctx ends; it returns then. Each beat is one script
// call whatever the number of accounts of lims (their limiters, sharing
// r), and at most one more for the health of an account no reply told
// lately (beat); it tells the process's denials on those accounts as
// denied gives them (nil: none) in the same call. A beat that fails
// (Redis down) is skipped: the process shows silent.
func Heartbeats(ctx context.Context, id, version string, r Redis, lims []*admission.Limiter, denied func() Denied) {
	if len(lims) == 0 {
		return
	}
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	host, _ := os.Hostname()
	b := beater{id: id, host: host, version: version, redis: r, lims: lims, denied: denied}
	for {
		b.beat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// beater is a process's heartbeat.
type beater struct {
	id, host, version string
	redis             Redis
	lims              []*admission.Limiter // the process's accounts'
	next              int                  // the account whose health is read next, round robin
	denied            func() Denied        // the process's denials so far; nil: none told
}

// beat is one heartbeat: the process and its state on every account in one
// call (the registry is in a slot of its own), then the health of at most one account that no script reply
// told for more than a beat. An account the process sends on learns its
// health from its admissions' replies; with N idle accounts, each is read
// at least every N beats.
func (b *beater) beat(ctx context.Context) {
	var denied Denied
	if b.denied != nil {
		denied = b.denied()
	}
	_ = b.redis.heartbeat(ctx, b.id, registryState(b.host, b.version, b.lims, denied))
	for i := range b.lims {
		n := (b.next + i) % len(b.lims)
		if asked, _ := b.lims[n].RefreshHealth(ctx, heartbeatEvery); asked {
			b.next = n + 1
			return
		}
	}
}

// registryState is a process's state in the registry: "<host> <version>
// <account>=<mode> ... <account>/<class>=<denied> ...", each account of
// lims with its mode (ok, fallback, paused, penalty), which
// parseRegistryState reads, then its denials on each of them, those not
// 0, which parseDenials reads. Account names have no spaces nor '/', and
// class names no '/' nor '=' (config): a reader of an older version takes
// a denial for the mode of an account that no configuration can name. A
// host's spaces are replaced.
func registryState(host, version string, lims []*admission.Limiter, denied Denied) string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(host, " ", "_") + " " + version)
	for _, l := range lims {
		b.WriteString(" " + l.Account() + "=" + modeOf(l))
	}
	for _, l := range lims {
		byClass := denied[l.Account()]
		for _, class := range slices.Sorted(maps.Keys(byClass)) {
			if n := byClass[class]; n > 0 {
				b.WriteString(" " + l.Account() + "/" + class + "=" + strconv.FormatInt(n, 10))
			}
		}
	}
	return b.String()
}

// parseRegistryState reads a registry's state: the process's host and
// version, and its mode on each of its accounts; ok is false if it has
// another shape. Its denials are parseDenials'.
func parseRegistryState(s string) (host, version string, modes map[string]string, ok bool) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return "", "", nil, false
	}
	modes = make(map[string]string, len(f)-2)
	for _, am := range f[2:] {
		// The last '=': an account's name may hold one, a mode does not.
		i := strings.LastIndexByte(am, '=')
		if i <= 0 {
			return "", "", nil, false
		}
		if strings.ContainsRune(am[:i], '/') {
			continue // a denial
		}
		modes[am[:i]] = am[i+1:]
	}
	return f[0], f[1], modes, true
}

// parseDenials reads a registry's state's denials, "<account>/<class>=<n>"
// (registryState), by account then class; a count that is not a number
// is left out.
func parseDenials(s string) Denied {
	denied := Denied{}
	for _, f := range strings.Fields(s) {
		i := strings.LastIndexByte(f, '=')
		account, class, ok := strings.Cut(f[:max(i, 0)], "/")
		n, err := strconv.ParseInt(f[i+1:], 10, 64)
		if i <= 0 || !ok || err != nil || n < 0 {
			continue
		}
		if denied[account] == nil {
			denied[account] = map[string]int64{}
		}
		denied[account][class] = n
	}
	return denied
}

// state is a heartbeat's state on an account's keys, as an older process
// wrote it: "<mode> <host> <version>", which parseState reads.
func state(mode, host, version string) string {
	return mode + " " + strings.ReplaceAll(host, " ", "_") + " " + version
}

// parseState reads a state on an account's keys; ok is false if it has
// another shape.
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
