// Package redisstats reads what a Redis server itself counted of the
// commands it executed (INFO commandstats), so that the demo and the load
// test report Redis's own figures next to what their clients counted.
//
// A measurement is CONFIG RESETSTAT before the traffic and INFO
// commandstats after it. RESETSTAT clears the statistics of the whole
// server, for every client: use it on a Redis of one's own.
package redisstats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CommandStats are the calls of each command since the last CONFIG
// RESETSTAT, by the name INFO commandstats gives it, lower case: "evalsha",
// or with Redis 7 a subcommand as "config|resetstat". The commands a script
// runs (redis.call) count under their own names.
type CommandStats map[string]int64

// scriptCommands run a Lua script or a function.
var scriptCommands = map[string]bool{
	"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true,
	"fcall": true, "fcall_ro": true,
}

// NotWork are the commands Executed leaves out, by their name before any
// "|": a client's connection setup (hello, auth, select, client: CLIENT
// SETINFO and SETNAME), its health and topology checks (ping, command:
// a cluster client's COMMAND, cluster: its CLUSTER SLOTS or SHARDS), and
// the measurement itself (config: CONFIG RESETSTAT, info: INFO
// commandstats). None of them is work a message causes.
var NotWork = []string{"hello", "auth", "select", "client", "ping", "command", "cluster", "config", "info"}

// Scripts returns the script calls: EVALSHA, EVAL and FCALL, read-only
// variants included.
func (s CommandStats) Scripts() int64 {
	var n int64
	for name, calls := range s {
		if scriptCommands[name] {
			n += calls
		}
	}
	return n
}

// Executed returns every command Redis executed, those the scripts ran
// included, less the NotWork ones.
func (s CommandStats) Executed() int64 {
	var n int64
	for name, calls := range s {
		base, _, _ := strings.Cut(name, "|")
		if !isNotWork(base) {
			n += calls
		}
	}
	return n
}

func isNotWork(name string) bool {
	for _, w := range NotWork {
		if name == w {
			return true
		}
	}
	return false
}

// Parse reads the text of INFO commandstats: a "# Commandstats" header and
// one line per command, such as
//
//	cmdstat_evalsha:calls=12,usec=345,usec_per_call=28.75,rejected_calls=0,failed_calls=0
//
// Lines of other sections are ignored; a text without the header is an
// error (a server, such as miniredis, that does not keep the figures).
func Parse(info string) (CommandStats, error) {
	s := CommandStats{}
	header := false
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if strings.EqualFold(line, "# Commandstats") {
			header = true
			continue
		}
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("redisstats: malformed line %q", line)
		}
		calls := int64(-1)
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("redisstats: malformed calls in %q", line)
				}
				calls = n
			}
		}
		if calls < 0 {
			return nil, fmt.Errorf("redisstats: no calls in %q", line)
		}
		s[strings.ToLower(name)] += calls
	}
	if !header {
		return nil, errors.New("redisstats: no # Commandstats section in the reply")
	}
	return s, nil
}

// Reset runs CONFIG RESETSTAT on rdb's server, or on every master of a
// Redis Cluster (the scripts run there; replicas only apply their effects).
func Reset(ctx context.Context, rdb redis.UniversalClient) error {
	return eachServer(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			return fmt.Errorf("redisstats: CONFIG RESETSTAT: %w", err)
		}
		return nil
	})
}

// Read returns INFO commandstats of rdb's server, summed over every master
// of a Redis Cluster.
func Read(ctx context.Context, rdb redis.UniversalClient) (CommandStats, error) {
	var mu sync.Mutex
	sum := CommandStats{}
	err := eachServer(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return fmt.Errorf("redisstats: INFO commandstats: %w", err)
		}
		s, err := Parse(info)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for name, calls := range s {
			sum[name] += calls
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sum, nil
}

// ScriptMicros returns the microseconds rdb's server (every master of a
// cluster) spent in script calls since the last CONFIG RESETSTAT: INFO
// commandstats' usec of EVALSHA, EVAL and FCALL, read-only variants
// included. A script's usec holds the commands it runs, so this is
// Redis's time for the scripts' work, each command counted once.
func ScriptMicros(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	var mu sync.Mutex
	var sum int64
	err := eachServer(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return fmt.Errorf("redisstats: INFO commandstats: %w", err)
		}
		n, err := parseScriptMicros(info)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		sum += n
		return nil
	})
	return sum, err
}

// parseScriptMicros sums the usec of the script commands in the text of
// INFO commandstats.
func parseScriptMicros(info string) (int64, error) {
	var sum int64
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, fields, _ := strings.Cut(rest, ":")
		if !scriptCommands[strings.ToLower(name)] {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return 0, fmt.Errorf("redisstats: malformed usec in %q", line)
				}
				sum += n
			}
		}
	}
	return sum, nil
}

// eachServer calls fn with a client of rdb's server, or of each master of
// a cluster (concurrently: fn must be safe for that).
func eachServer(ctx context.Context, rdb redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.Client:
		return fn(ctx, c)
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	default:
		return fmt.Errorf("redisstats: a %T has no single server to read", rdb)
	}
}
