package admission

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterStateReloadInterval is how often FollowFailovers has a cluster
// client reload its slot map.
const ClusterStateReloadInterval = time.Second

// FollowFailovers sets what a Redis Cluster client needs to find a promoted
// replica within seconds of a master's failure. go-redis reloads its slot
// map on a MOVED reply or every ClusterStateReloadInterval (60s by
// default); a call that times out on a master that stopped answering
// reloads nothing. Without this, every pod decides locally (the slow
// fallback) for up to a minute after the cluster has failed over.
//
// A reload runs without a deadline of its own and may ask the dead node
// first, so the dial, read and write timeouts are lowered too (5s by
// default), to callTimeout or 1s, whichever is longer: go-redis bounds every
// command by the read timeout even when its context allows more, so they
// must not be below the longest call the client makes.
func FollowFailovers(o *redis.ClusterOptions, callTimeout time.Duration) {
	o.ClusterStateReloadInterval = ClusterStateReloadInterval
	t := max(callTimeout, time.Second)
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = t, t, t
}
