package admission

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// NoEviction is the maxmemory-policy under which a full Redis refuses
// writes instead of dropping keys. It is the only policy the limiter's
// state is safe under: every key it writes (send-once records, penalties,
// leases, TATs) has an expiry, so the volatile-* policies drop them as
// readily as the allkeys-* ones, and a dropped record sends an id twice, a
// dropped lease lifts the in-flight limit, a dropped penalty ends a 429
// early. Under noeviction a full Redis refuses the scripts' writes (OOM):
// the limiter then decides in its fallback, as with Redis down
// (docs/decisions.md, "Redis full").
const NoEviction = "noeviction"

// Evicts reports whether policy lets Redis drop keys to make room: any
// policy but NoEviction.
func Evicts(policy string) bool { return policy != NoEviction }

// nodeInfo is what MaxmemoryPolicy asks of one Redis server.
type nodeInfo interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
	Info(ctx context.Context, section ...string) *redis.StringCmd
}

// masters is a Redis Cluster client, whose policy is each master's.
type masters interface {
	ForEachMaster(ctx context.Context, fn func(ctx context.Context, client *redis.Client) error) error
}

// MaxmemoryPolicy returns the maxmemory-policy of the Redis behind rdb:
// CONFIG GET's, or where CONFIG is refused (Memorystore does not offer
// it; an ACL may deny it), the maxmemory_policy line of INFO memory. Of
// a Redis Cluster it asks every master and returns an evicting policy if
// any master has one.
func MaxmemoryPolicy(ctx context.Context, rdb nodeInfo) (string, error) {
	c, ok := rdb.(masters)
	if !ok {
		return nodePolicy(ctx, rdb)
	}
	var mu sync.Mutex
	found := ""
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		p, err := nodePolicy(ctx, node)
		if err != nil {
			return fmt.Errorf("%s: %w", node.Options().Addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if found == "" || Evicts(p) {
			found = p
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return found, nil
}

// nodePolicy is MaxmemoryPolicy of one server.
func nodePolicy(ctx context.Context, rdb nodeInfo) (string, error) {
	m, cerr := rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if p := m["maxmemory-policy"]; cerr == nil && p != "" {
		return p, nil
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return "", fmt.Errorf("maxmemory-policy: config get: %v; info memory: %w", cerr, err)
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "maxmemory_policy:"); ok && p != "" {
			return p, nil
		}
	}
	return "", errors.New("maxmemory-policy: config get refused and no maxmemory_policy in info memory")
}
