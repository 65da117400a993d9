package status

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/scriptop"
)

// accountsOn are n accounts with their limiters on rdb, named after the
// test, and rdb as they share it: their circuit (one, as a server's
// limiters share it), their timeout.
func accountsOn(t *testing.T, rdb redis.Scripter, n int) ([]Setup, []*admission.Limiter, Redis) {
	t.Helper()
	name := redistest.UniqueAccount(t)
	var setups []Setup
	var lims []*admission.Limiter
	circuit := admission.NewCircuit(0, nil)
	for i := range n {
		acct := config.Account{Name: fmt.Sprintf("%s-%d", name, i), Provider: "generic", RateUnit: "message",
			ContractRPS: 100, TargetRPS: 90, MarketingRPS: 70, Burst: 5}
		lim, err := admission.New(rdb, config.Process{MaxSenders: 3, RedisTimeout: 2 * time.Second}.Limiter(acct), admission.WithCircuit(circuit))
		if err != nil {
			t.Fatal(err)
		}
		setups, lims = append(setups, Setup{Account: acct, Limiter: lim}), append(lims, lim)
	}
	return setups, lims, Redis{Client: rdb, Circuit: circuit, Timeout: 2 * time.Second}
}

// scriptCalls counts the script calls rec saw, by operation: each call's
// EVALSHA, not the EVAL that follows a NOSCRIPT.
func scriptCalls(rec *redistest.Recorder) map[string]int {
	n := map[string]int{}
	for _, args := range rec.Commands() {
		if name := fmt.Sprint(args[0]); name == "evalsha" || name == "evalsha_ro" {
			n[scriptop.Of(args)]++
		}
	}
	return n
}

// TestABeatCostsTheSameWhateverTheAccounts: a process of 1 or 20 accounts
// makes one heartbeat call a beat, and at most one more for an idle
// account's health: on a Redis and on a Redis Cluster (where the registry
// and each account are in slots of their own).
func TestABeatCostsTheSameWhateverTheAccounts(t *testing.T) {
	for _, on := range []string{"redis", "cluster"} {
		for _, accounts := range []int{1, 20} {
			t.Run(fmt.Sprintf("%s/%d", on, accounts), func(t *testing.T) {
				rec := &redistest.Recorder{}
				var rdb redis.UniversalClient = redistest.Client(t)
				if on == "cluster" {
					rdb = redistest.ClusterClient(t)
				}
				rdb.AddHook(rec)
				_, lims, shared := accountsOn(t, rdb, accounts)
				b := beater{id: redistest.UniqueAccount(t), host: "h", version: "v", redis: shared, lims: lims}
				const beats = 3
				for range beats {
					b.beat(context.Background())
				}
				calls := scriptCalls(rec)
				total := 0
				for _, n := range calls {
					total += n
				}
				t.Logf("%d beats of %d accounts: %d script calls %v", beats, accounts, total, calls)
				if calls[OpHeartbeat] != beats || total > 2*beats {
					t.Fatalf("%d beats of %d accounts made %d script calls %v; want %d heartbeats, at most %d calls",
						beats, accounts, total, calls, beats, 2*beats)
				}
			})
		}
	}
}

// TestABeatReadsAnIdleAccountsHealth: a process that sends nothing on its
// accounts learns their health, one account a beat, each only while no
// reply told it for more than a beat.
func TestABeatReadsAnIdleAccountsHealth(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	rec := &redistest.Recorder{}
	rdb.AddHook(rec)
	setups, lims, shared := accountsOn(t, rdb, 3)
	degraded := fmt.Sprintf("d 5 0 0 0 0 %d", time.Now().UnixMicro())
	if err := rdb.Set(ctx, keys.For(setups[2].Name).Health(), degraded, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	b := beater{id: redistest.UniqueAccount(t), host: "h", version: "v", redis: shared, lims: lims}
	for range 3 {
		b.beat(ctx)
	}
	if h := lims[2].Health(); h != admission.Degraded {
		t.Fatalf("the idle account after 3 beats: %v, want degraded", h)
	}
	if n := scriptCalls(rec)[admission.OpHealth]; n != 3 {
		t.Fatalf("%d health reads in 3 beats of 3 idle accounts, want 3", n)
	}
	rec.Reset()
	b.beat(ctx) // every account told within a beat: none read
	if n := scriptCalls(rec)[admission.OpHealth]; n != 0 {
		t.Fatalf("%d health reads with every account's health just told, want none", n)
	}
}

// TestReadListsEachAccountsProcesses: status lists, on each account, the
// processes whose beat names it, with their mode there; one silent for
// more than AliveWithin as silent; and one an older version left on the
// account's own keys (a rolling deploy).
func TestReadListsEachAccountsProcesses(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	setups, lims, shared := accountsOn(t, rdb, 2)
	a, b := setups[0].Name, setups[1].Name
	id := redistest.UniqueAccount(t)
	both := beater{id: id + "-both", host: "h1", version: "v2", redis: shared, lims: lims}
	both.beat(ctx)
	onlyB := beater{id: id + "-b", host: "h2", version: "v2", redis: shared, lims: lims[1:]}
	onlyB.beat(ctx)
	ago := float64(time.Now().Add(-10 * time.Second).UnixMicro())
	for _, kv := range []struct{ z, h, id, state string }{
		{keys.Processes(), keys.ProcessStates(), id + "-silent", "h3 v2 " + a + "=fallback"},
		{keys.For(a).LegacyProcesses(), keys.For(a).LegacyProcessStates(), id + "-old", "ok h4 v1"},
	} {
		if err := rdb.ZAdd(ctx, kv.z, redis.Z{Score: ago, Member: kv.id}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, kv.h, kv.id, kv.state).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.ZAdd(ctx, keys.For(a).LegacyProcesses(), redis.Z{Score: float64(time.Now().UnixMicro()), Member: id + "-old"}).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := Read(ctx, Redis{Client: rdb}, setups, config.Routing{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{} // account/id -> "mode host version alive"
	for _, acct := range r.Accounts {
		for _, p := range acct.Processes {
			got[acct.Name+"/"+p.ID] = fmt.Sprintf("%s %s %s %v", p.Mode, p.Host, p.Version, p.Alive)
		}
	}
	want := map[string]string{
		a + "/" + id + "-both": "ok h1 v2 true", b + "/" + id + "-both": "ok h1 v2 true",
		b + "/" + id + "-b":      "ok h2 v2 true",
		a + "/" + id + "-silent": "silent h3 v2 false",
		a + "/" + id + "-old":    "ok h4 v1 true",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("processes by account:\n%v\nwant\n%v", got, want)
	}
}

// TestARegistryStateReadsBack: the registry's state a beat writes is the
// one Read parses, a host with spaces and an account with '=' included.
func TestARegistryStateReadsBack(t *testing.T) {
	host, version, modes, ok := parseRegistryState("my_host 1.2.3 a=ok b=c=penalty")
	if !ok || host != "my_host" || version != "1.2.3" || len(modes) != 2 || modes["a"] != "ok" || modes["b=c"] != "penalty" {
		t.Fatalf("read back %q %q %v %v", host, version, modes, ok)
	}
	if _, _, _, ok := parseRegistryState("ok host"); !ok {
		t.Fatalf("a process of no account: not read")
	}
	if _, _, _, ok := parseRegistryState("host v =ok"); ok {
		t.Fatalf("an account without a name: read")
	}
}

// TestABeatTellsTheProcessDenials: each process's beat tells its denials
// on each of its accounts, and Read gives them on the account's listing
// of the process, by class: two processes on one account each with their
// own, an account the process does not serve with none, a class of no
// denial left out.
func TestABeatTellsTheProcessDenials(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	setups, lims, shared := accountsOn(t, rdb, 2)
	a, b := setups[0].Name, setups[1].Name
	id := redistest.UniqueAccount(t)
	told := func(d Denied) func() Denied { return func() Denied { return d } }
	p1 := beater{id: id + "-1", host: "h1", version: "v", redis: shared, lims: lims,
		denied: told(Denied{a: {"marketing": 3, "otp": 0}, b: {"otp": 2}, "elsewhere": {"otp": 9}})}
	p2 := beater{id: id + "-2", host: "h2", version: "v", redis: shared, lims: lims[:1],
		denied: told(Denied{a: {"marketing": 4}, b: {"marketing": 8}})}
	p1.beat(ctx)
	p2.beat(ctx)
	r, err := Read(ctx, Redis{Client: rdb}, setups, config.Routing{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{} // account/id -> denials
	for _, acct := range r.Accounts {
		for _, p := range acct.Processes {
			got[acct.Name+"/"+p.ID] = fmt.Sprint(p.Denied)
		}
	}
	want := map[string]string{
		a + "/" + id + "-1": "map[marketing:3]", b + "/" + id + "-1": "map[otp:2]",
		a + "/" + id + "-2": "map[marketing:4]",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("denials by account and process:\n%v\nwant\n%v", got, want)
	}
}

// TestARegistryStatesDenialsReadBack: the denials a beat writes in the
// state read back, an account with '=' included, and leave the modes as
// they were.
func TestARegistryStatesDenialsReadBack(t *testing.T) {
	s := "h v a=b=ok c=penalty a=b/otp=3 c/marketing=12 c/x=notanumber"
	_, _, modes, ok := parseRegistryState(s)
	if !ok || fmt.Sprint(modes) != "map[a=b:ok c:penalty]" {
		t.Fatalf("modes %v %v, want a=b ok and c penalty", modes, ok)
	}
	if d := parseDenials(s); fmt.Sprint(d) != "map[a=b:map[otp:3] c:map[marketing:12]]" {
		t.Fatalf("denials %v", d)
	}
}
