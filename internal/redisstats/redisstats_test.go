package redisstats

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
)

func TestParse(t *testing.T) {
	// As Redis 7 writes it: subcommands after "|", \r\n line ends.
	const redis7 = "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=12,usec=345,usec_per_call=28.75,rejected_calls=0,failed_calls=1\r\n" +
		"cmdstat_eval:calls=1,usec=80,usec_per_call=80.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_set:calls=13,usec=20,usec_per_call=1.54,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hello:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setinfo:calls=6,usec=6,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=9,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_script|load:calls=2,usec=9,usec_per_call=4.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_FCALL:calls=4,usec=9,usec_per_call=2.25,rejected_calls=0,failed_calls=0\r\n"
	s, err := Parse(redis7)
	if err != nil {
		t.Fatal(err)
	}
	if s["client|setinfo"] != 6 || s["fcall"] != 4 {
		t.Errorf("parsed %v", s)
	}
	// evalsha 12 + eval 1 + fcall 4; failed calls count too: Redis ran them.
	if got := s.Scripts(); got != 17 {
		t.Errorf("Scripts() = %d, want 17", got)
	}
	// 17 scripts + set 13 + script|load 2; hello, client, config left out.
	if got := s.Executed(); got != 32 {
		t.Errorf("Executed() = %d, want 32", got)
	}

	// Redis 6 names no subcommand; other sections are ignored.
	s, err = Parse("# Server\nredis_version:6.2.6\n# Commandstats\ncmdstat_client:calls=2,usec=1\ncmdstat_get:calls=5,usec=1\n")
	if err != nil || s.Executed() != 5 || s.Scripts() != 0 {
		t.Errorf("Redis 6 text: %v, %v; want get 5 executed, no script", s, err)
	}
	// Just after CONFIG RESETSTAT the section may be empty.
	if s, err := Parse("# Commandstats\r\n"); err != nil || len(s) != 0 {
		t.Errorf("empty section: %v, %v", s, err)
	}
	for _, bad := range []string{
		"", // no section: miniredis, a proxy
		"# Stats\r\ntotal_commands_processed:3\r\n", // another section only
		"# Commandstats\r\ncmdstat_get:usec=1\r\n",  // no calls
		"# Commandstats\r\ncmdstat_get:calls=x\r\n", // calls not a number
		"# Commandstats\r\ncmdstat_get\r\n",         // no fields
	} {
		if s, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", bad, s)
		}
	}
}

// TestResetAndReadOnRedis runs known commands on a real redis-server of
// its own (RESETSTAT clears a whole server's figures, and the shared test
// Redis serves other packages' tests at the same time) and checks what
// Redis counted.
func TestResetAndReadOnRedis(t *testing.T) {
	rdb := privateRedis(t)
	ctx := context.Background()
	if err := rdb.Set(ctx, "before", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := Reset(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	// Two script calls that each run two commands, one other command.
	script := redis.NewScript(`redis.call("SET", KEYS[1], ARGV[1]); return redis.call("INCR", KEYS[2])`)
	if err := script.Eval(ctx, rdb, []string{"a", "n"}, "x").Err(); err != nil {
		t.Fatal(err)
	}
	if err := script.EvalSha(ctx, rdb, []string{"a", "n"}, "y").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Get(ctx, "a").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil { // left out: not work
		t.Fatal(err)
	}
	s, err := Read(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if s["set"] != 2 || s["incr"] != 2 || s["evalsha"] != 1 || s["eval"] != 1 {
		t.Errorf("Redis counted %v; want set 2, incr 2 (the scripts' own), evalsha 1, eval 1; the SET before RESETSTAT gone", s)
	}
	if got := s.Scripts(); got != 2 {
		t.Errorf("Scripts() = %d, want 2", got)
	}
	// eval, evalsha, 2 × (set, incr), get.
	if got := s.Executed(); got != 7 {
		t.Errorf("Executed() = %d, want 7 (%v)", got, s)
	}
	// Reading again counts nothing new but the INFO itself, left out.
	if again, err := Read(ctx, rdb); err != nil || again.Executed() != 7 {
		t.Errorf("second Read: %d executed, %v; want 7", again.Executed(), err)
	}
	// The scripts' time: some, and none once reset.
	if us, err := ScriptMicros(ctx, rdb); err != nil || us <= 0 {
		t.Errorf("ScriptMicros after two script calls = %d, %v; want > 0", us, err)
	}
	if err := Reset(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	if us, err := ScriptMicros(ctx, rdb); err != nil || us != 0 {
		t.Errorf("ScriptMicros after RESETSTAT = %d, %v; want 0", us, err)
	}
}

func TestParseScriptMicros(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_evalsha:calls=12,usec=345,usec_per_call=28.75,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_get:calls=3,usec=9,usec_per_call=3.00\r\ncmdstat_eval:calls=1,usec=50,usec_per_call=50.00\r\n"
	if n, err := parseScriptMicros(info); err != nil || n != 395 {
		t.Errorf("parseScriptMicros = %d, %v; want 395 (evalsha and eval, not get)", n, err)
	}
	if _, err := parseScriptMicros("cmdstat_evalsha:calls=1,usec=x\r\n"); err == nil {
		t.Error("a malformed usec was accepted")
	}
}

// TestResetAndReadOnCluster: on a Redis Cluster both act on every master
// and Read sums them. The test cluster is shared with other tests running
// at the same time, so only lower bounds hold.
func TestResetAndReadOnCluster(t *testing.T) {
	rdb := redistest.ClusterClient(t)
	ctx := context.Background()
	if err := Reset(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	key := "{redisstats}:" + redistest.UniqueAccount(t)
	if err := rdb.Eval(ctx, `return redis.call("INCR", KEYS[1])`, []string{key}).Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.Del(ctx, key)
	s, err := Read(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if s.Scripts() < 1 || s["incr"] < 1 || s.Executed() < 2 {
		t.Errorf("cluster counted %v: want the EVAL and its INCR at least", s)
	}
}

// privateRedis returns a client of a redis-server of the test's own.
func privateRedis(t *testing.T) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: redistest.Private(t), MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}
