//go:build unix

package admission

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
)

// clusterHang bounds every wait on the cluster itself (a failover, a
// rejoin, a sync): it only guards a hang, it is no timing assertion.
const clusterHang = 30 * time.Second

// TestClusterMasterFailoverKeepsDeciding: a Redis Cluster master is
// killed; the limiter keeps deciding, the overshoot is bounded by BURST (the
// TAT lost on failover), nothing crashes. On the real cluster of .ci/redis.sh (3 masters,
// one replica each).
//
// MaxSenders "pods", each its own ClusterClient and Limiter, take OTP slots
// continuously. Half a second in, the account's keys are deleted: the state
// a failover to a replica that had not received the last writes leaves,
// every TAT lost. Then the master serving the account's slot is frozen
// (SIGSTOP: it stops answering, as a dead master does, and it heals by
// itself) until its replica is promoted and every pod decides on Redis
// again; then it is thawed, and the test waits until it has rejoined as a
// replica and synced, so that the next run can fail the cluster over again.
//
// Checked: every call returns a decision in time (no hang, no panic), the
// pods decide locally while the master is frozen and on Redis after the
// promotion, and the slots admitted in any 1s window W stay within what
// the configuration allows, T being the emission interval of TARGET_RPS:
//
//   - on Redis, GCRA admits at most W/T + BURST; a loss of the keys forgets
//     the TAT and GCRA starts over with a full BURST: BURST more;
//   - a pod's fallback admits one slot at a time, one per MaxSenders·T: at
//     most W/(MaxSenders·T) + 1, whether or not the other pods are on Redis
//     (a pod back on Redis reserves the others' share for one
//     RedisRetryAfter only, and a pod whose client finds the new master
//     later than the others falls back for longer);
//   - altogether, the sum: W/T + BURST, plus a fallback share per pod that
//     fell back in the window, plus BURST across a loss.
func TestClusterMasterFailoverKeepsDeciding(t *testing.T) {
	nodes := clusterNodes(t)
	waitClusterReady(t, nodes) // a previous run may still be rejoining

	cfg := Config{
		Account:   redistest.UniqueAccount(t),
		TargetRPS: 50, MarketingRPS: 50, Burst: 5, MaxSenders: 3,
		RedisTimeout: 200 * time.Millisecond, RedisRetryAfter: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	pods := make([]*Limiter, cfg.MaxSenders)
	for i := range pods {
		pods[i] = newLimiter(t, podClient(t), cfg)
	}
	admin := podClient(t)
	ctx := context.Background()

	// Two callers per pod, each asking again when the answer says (at least
	// 1ms, at most 50ms later: a limiter that admits everything must not
	// bury the test in calls). TryAcquire, not Acquire: a call's start and
	// end bracket the instant of its decision.
	rec := &callRecorder{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p, l := range pods {
		for range 2 {
			wg.Go(func() {
				for {
					start := time.Now()
					d, err := l.tryOnce(ctx, OTP)
					rec.add(call{pod: p, start: start, end: time.Now(), d: d, err: err})
					wait := time.Millisecond
					if !d.Allowed {
						wait = min(max(d.RetryAfter, wait), 50*time.Millisecond)
					}
					select {
					case <-stop:
						return
					case <-time.After(wait):
					}
				}
			})
		}
	}
	stopLoad := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	t.Cleanup(stopLoad)

	// Phase 1: on Redis. The keys are lost within the first window W, the
	// one of the first burst, and the load goes on for another W.
	const w = time.Second
	time.Sleep(500 * time.Millisecond)
	keys := pods[0].tatKeys()
	lossStart := time.Now()
	if err := admin.Del(ctx, keys...).Err(); err != nil {
		t.Fatalf("DEL %v: %v", keys, err)
	}
	lossEnd := time.Now()
	time.Sleep(w)

	// Phase 2: the account's master stops answering.
	master, err := admin.MasterForKey(ctx, keys[0])
	if err != nil {
		t.Fatalf("master of %s: %v", keys[0], err)
	}
	masterAddr := master.Options().Addr
	slot, err := admin.ClusterKeySlot(ctx, keys[0]).Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT: %v", err)
	}
	if nodes[masterAddr] == nil {
		t.Fatalf("master %s of slot %d is not among the nodes %v", masterAddr, slot, slices.Sorted(maps.Keys(nodes)))
	}
	pid := redisPid(t, nodes[masterAddr])
	thaw := sync.OnceFunc(func() {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Errorf("SIGCONT redis %d (%s): %v", pid, masterAddr, err)
		}
	})
	t.Cleanup(func() {
		thaw()
		waitClusterReady(t, nodes)
	})
	freezeAt := time.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP redis %d (%s): %v", pid, masterAddr, err)
	}
	var witness *redis.Client // any node but the frozen one
	for addr, c := range nodes {
		if addr != masterAddr {
			witness = c
			break
		}
	}
	newMaster := waitPromotion(t, witness, slot, masterAddr)
	promotedAt := time.Now()
	t.Logf("slot %d: master %s (pid %d) frozen; replica %s promoted %v later",
		slot, masterAddr, pid, newMaster, promotedAt.Sub(freezeAt).Round(time.Millisecond))

	// Every pod decides on Redis again while the old master is still
	// frozen: each client found the new master by itself.
	const followWithin = 10 * time.Second
	backAt := map[int]time.Time{}
	for deadline := time.Now().Add(followWithin); len(backAt) < len(pods); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pods decided on Redis within %v of the promotion (old master still frozen)",
				len(backAt), len(pods), followWithin)
		}
		for _, c := range rec.since(promotedAt) {
			if _, ok := backAt[c.pod]; !ok && c.d.Source == SourceRedis {
				backAt[c.pod] = c.end
			}
		}
	}
	var back []time.Duration
	for p := range pods {
		back = append(back, backAt[p].Sub(promotedAt).Round(time.Millisecond))
	}
	t.Logf("pods back on Redis %v after the promotion", back)
	time.Sleep(500 * time.Millisecond)

	// Phase 3: the old master wakes up, rejoins as a replica and syncs,
	// under load.
	thawAt := time.Now()
	thaw()
	waitClusterReady(t, nodes)
	t.Logf("old master rejoined as a replica and synced %v after the thaw", time.Since(thawAt).Round(time.Millisecond))
	time.Sleep(200 * time.Millisecond)
	stopLoad()

	// Every call decided, in time.
	calls := rec.all()
	hangGuard := 10 * cfg.RedisTimeout // a call this slow has hung
	bySource, allowedBySource := map[Source]int{}, map[Source]int{}
	var slowest time.Duration
	var fbFrozen, redisAfter int
	for _, c := range calls {
		if c.err != nil || c.d.Source == "" {
			t.Fatalf("pod %d, %v from the freeze: TryAcquire returned %+v, %v",
				c.pod, c.start.Sub(freezeAt).Round(time.Millisecond), c.d, c.err)
		}
		bySource[c.d.Source]++
		if c.d.Allowed {
			allowedBySource[c.d.Source]++
		}
		slowest = max(slowest, c.end.Sub(c.start))
		switch {
		case c.start.After(freezeAt) && c.end.Before(promotedAt) && c.d.Source == SourceFallback:
			fbFrozen++
		case c.start.After(promotedAt) && c.d.Source == SourceRedis:
			redisAfter++
		}
	}
	t.Logf("%d decisions by source %v, admitted %v; %d fallback decisions while frozen, %d Redis decisions after the promotion; slowest call %v",
		len(calls), bySource, allowedBySource, fbFrozen, redisAfter, slowest.Round(time.Millisecond))
	if slowest > hangGuard {
		t.Errorf("a call took %v, more than %v: the limiter hung on the cluster", slowest, hangGuard)
	}
	if fbFrozen == 0 {
		t.Errorf("no fallback decision while the master was frozen")
	}

	// Admissions in any window W.
	base := int(w/interval(cfg.TargetRPS)) + cfg.Burst
	share := int(w/interval(cfg.TargetRPS/float64(cfg.MaxSenders))) + 1
	lost := func(from, to time.Time) bool { return lossStart.Before(to) && lossEnd.After(from) }
	var redisAdm, allAdm []call
	fbAdm := make([][]call, len(pods))
	for _, c := range calls {
		switch {
		case !c.d.Allowed:
		case c.d.Source == SourceRedis:
			redisAdm = append(redisAdm, c)
		default:
			fbAdm[c.pod] = append(fbAdm[c.pod], c)
		}
		if c.d.Allowed {
			allAdm = append(allAdm, c)
		}
	}
	check := func(what string, adm []call, limit func(from, to time.Time, in []call) int) int {
		t.Helper()
		return windows(t, what, adm, w, freezeAt, limit)
	}
	redisAfterLoss := 0
	for _, c := range redisAdm {
		if c.start.After(lossEnd) && c.end.Before(lossEnd.Add(w)) {
			redisAfterLoss++
		}
	}
	if redisAfterLoss == 0 {
		t.Errorf("no Redis admission in the %v after the keys were lost: the loss was not exercised", w)
	}
	mostLost, mostKept := 0, 0
	check("on Redis", redisAdm, func(from, to time.Time, in []call) int {
		if lost(from, to) {
			mostLost = max(mostLost, len(in))
			return base + cfg.Burst
		}
		mostKept = max(mostKept, len(in))
		return base
	})
	t.Logf("on Redis: most admitted in 1s %d (bound %d), %d across the loss of the keys (bound %d)",
		mostKept, base, mostLost, base+cfg.Burst)
	for p := range pods {
		most := check(fmt.Sprintf("by pod %d's fallback", p), fbAdm[p], func(time.Time, time.Time, []call) int { return share })
		t.Logf("pod %d's fallback: most admitted in 1s %d (bound %d)", p, most, share)
	}
	mostAll, mostMixed := 0, 0 // most in a window without the loss; of those with Redis and fallback admissions
	check("altogether", allAdm, func(from, to time.Time, in []call) int {
		limit := base
		if lost(from, to) {
			limit += cfg.Burst
		}
		fellBack, nfb := map[int]bool{}, 0
		for _, c := range in {
			if c.d.Source == SourceFallback {
				nfb++
				if !fellBack[c.pod] {
					fellBack[c.pod] = true
					limit += share
				}
			}
		}
		if !lost(from, to) {
			mostAll = max(mostAll, len(in))
			if 0 < nfb && nfb < len(in) {
				mostMixed = max(mostMixed, len(in))
			}
		}
		return limit
	})
	t.Logf("altogether: most admitted in 1s %d, %d where pods on Redis and pods in fallback both admitted (TARGET_RPS·1s + BURST = %d, plus %d a pod that fell back)",
		mostAll, mostMixed, base, share)
}

// windows checks that no window [from, from+w) holds more of adm than
// limit allows, each window starting where a call of adm starts. A call's
// decision was taken between its start and its end: counting only the
// calls wholly inside a window counts no more than were admitted in it,
// however late a goroutine ran. It returns the most found in one window.
func windows(t *testing.T, what string, adm []call, w time.Duration, ref time.Time,
	limit func(from, to time.Time, in []call) int) (most int) {
	t.Helper()
	adm = slices.Clone(adm)
	slices.SortFunc(adm, func(a, b call) int { return a.start.Compare(b.start) })
	over := 0
	for i, first := range adm {
		from, to := first.start, first.start.Add(w)
		var in []call
		for _, c := range adm[i:] {
			if !c.start.Before(to) {
				break
			}
			if c.end.Before(to) {
				in = append(in, c)
			}
		}
		most = max(most, len(in))
		if lim := limit(from, to, in); len(in) > lim {
			if over++; over <= 3 {
				t.Errorf("%d admitted %s in [%v, %v) from the freeze: above the bound %d",
					len(in), what, from.Sub(ref).Round(time.Millisecond), to.Sub(ref).Round(time.Millisecond), lim)
			}
		}
	}
	return most
}

// podClient is a pod's client of the test cluster.
//
// go-redis reloads its slot map on a MOVED reply or once the map is
// ClusterStateReloadInterval old (default 60s). A master that stops
// answering sends no MOVED, and a call that times out triggers no reload:
// with the defaults a pod calls the dead master (and falls back) until it
// answers again or a minute has passed. So the map is reloaded every
// second, and ReadTimeout bounds a reload that asks the dead master first
// (default 5s).
func podClient(t *testing.T) *redis.ClusterClient {
	t.Helper()
	o := &redis.ClusterOptions{Addrs: redistest.ClusterAddrs(t), ContextTimeoutEnabled: true, DisableIdentity: true}
	FollowFailovers(o, 200*time.Millisecond) // as internal/redisconn does (REDIS_TIMEOUT of the pods below)
	c := redis.NewClusterClient(o)
	t.Cleanup(func() { c.Close() })
	// A pod that has been up a while: the slot map loaded, a connection to
	// every master (a first call that does this may take longer than
	// RedisTimeout on a loaded machine and fall back).
	ctx, cancel := context.WithTimeout(context.Background(), clusterHang)
	defer cancel()
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.Ping(ctx).Err()
	}); err != nil {
		t.Fatalf("redis cluster at %v: %v", redistest.ClusterAddrs(t), err)
	}
	return c
}

type call struct {
	pod        int
	start, end time.Time
	d          Decision
	err        error
}

type callRecorder struct {
	mu    sync.Mutex
	calls []call // guarded by mu
}

func (r *callRecorder) add(c call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

func (r *callRecorder) all() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *callRecorder) since(t time.Time) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.calls {
		if c.start.After(t) {
			out = append(out, c)
		}
	}
	return out
}

// clusterNodes returns a client of every node of the test cluster, by
// address, from CLUSTER NODES on the first seed that answers.
func clusterNodes(t *testing.T) map[string]*redis.Client {
	t.Helper()
	var lines string
	var err error
	for _, seed := range redistest.ClusterAddrs(t) {
		c := redis.NewClient(redistest.Options(seed))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		lines, err = c.ClusterNodes(ctx).Result()
		cancel()
		c.Close()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("CLUSTER NODES: %v", err)
	}
	nodes := map[string]*redis.Client{}
	for _, line := range strings.Split(strings.TrimSpace(lines), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			addr, _, _ := strings.Cut(f[1], "@")
			nodes[addr] = redistest.ClientOf(t, addr)
		}
	}
	return nodes
}

// waitClusterReady waits until the cluster can fail over at once: every
// node sees it ok with no node failing, the masters are the nodes that
// serve slots, each has an online replica, and every replica has finished
// its sync.
func waitClusterReady(t *testing.T, nodes map[string]*redis.Client) {
	t.Helper()
	deadline := time.Now().Add(clusterHang)
	for {
		why := clusterNotReady(nodes)
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ready after %v: %s", clusterHang, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterNotReady says why the cluster is not ready, or "".
func clusterNotReady(nodes map[string]*redis.Client) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var serving []string // the masters serving slots, as every node sees them
	masters := map[string]bool{}
	for addr, c := range nodes {
		info, err := c.ClusterInfo(ctx).Result()
		if err != nil {
			return addr + ": " + err.Error()
		}
		if !strings.Contains(info, "cluster_state:ok") ||
			!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(nodes))+"\r") {
			return addr + ": cluster not ok or not every node known"
		}
		view, err := c.ClusterNodes(ctx).Result()
		if err != nil {
			return addr + ": " + err.Error()
		}
		var sees []string
		for _, line := range strings.Split(strings.TrimSpace(view), "\n") {
			f := strings.Fields(line)
			if len(f) < 8 {
				return addr + ": bad CLUSTER NODES line " + line
			}
			if strings.Contains(f[2], "fail") || strings.Contains(f[2], "handshake") || f[7] != "connected" {
				return addr + ": sees " + line
			}
			if len(f) > 8 { // it serves slots
				n, _, _ := strings.Cut(f[1], "@")
				sees = append(sees, n)
			}
		}
		slices.Sort(sees)
		if serving == nil {
			serving = sees
		} else if !slices.Equal(serving, sees) {
			return fmt.Sprintf("%s sees slots served by %v, another node by %v", addr, sees, serving)
		}
		repl, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return addr + ": " + err.Error()
		}
		switch {
		case strings.Contains(repl, "role:master"):
			masters[addr] = true
			online := false
			for _, line := range strings.Split(repl, "\n") {
				online = online || strings.HasPrefix(line, "slave0:") && strings.Contains(line, "state=online")
			}
			if !online {
				return addr + ": master without an online replica"
			}
		case !strings.Contains(repl, "master_link_status:up"):
			return addr + ": replica not linked to its master"
		case !strings.Contains(repl, "master_sync_in_progress:0"):
			return addr + ": replica still syncing"
		}
	}
	if m := slices.Sorted(maps.Keys(masters)); !slices.Equal(m, serving) {
		return fmt.Sprintf("masters %v, but slots served by %v", m, serving)
	}
	return ""
}

// redisPid returns the pid of the redis-server behind c, after checking it
// is one.
func redisPid(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatalf("INFO server: %v", err)
	}
	pid := 0
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid <= 1 || pid == os.Getpid() {
		t.Fatalf("INFO server of %s: no usable process_id (%d)", c.Options().Addr, pid)
	}
	// The cluster must run on this machine: a pid from another host or
	// namespace could name an unrelated process here.
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		t.Fatalf("pid %d of %s: %v (the test freezes a local redis-server through /proc's pid)", pid, c.Options().Addr, err)
	}
	if !bytes.HasPrefix(comm, []byte("redis-server")) {
		t.Fatalf("pid %d of %s is %q, not redis-server", pid, c.Options().Addr, bytes.TrimSpace(comm))
	}
	return pid
}

// waitPromotion waits until witness reports slot served by a master other
// than old, and returns its address.
func waitPromotion(t *testing.T, witness *redis.Client, slot int64, old string) string {
	t.Helper()
	deadline := time.Now().Add(clusterHang)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ranges, err := witness.ClusterSlots(ctx).Result()
		cancel()
		for _, r := range ranges {
			if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 && r.Nodes[0].Addr != old {
				return r.Nodes[0].Addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica of %s promoted within %v (last error %v)", old, clusterHang, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
