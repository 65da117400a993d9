package admission

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// Failover settings of a Redis Cluster client; see FollowFailovers.
const (
	ClusterStateReloadInterval = time.Second
	ClusterReadTimeout         = time.Second
)

// FollowFailovers sets what a Redis Cluster client needs to find a promoted
// replica within seconds of a master's failure. go-redis reloads its slot
// map on a MOVED reply or every ClusterStateReloadInterval (60s by
// default); a call that times out on a master that stopped answering
// reloads nothing. Without this, every pod decides locally (the slow
// fallback) for up to a minute after the cluster has failed over. The read
// timeout bounds a reload that asks the dead node first; the limiter's
// calls carry their own, shorter deadline.
func FollowFailovers(o *redis.ClusterOptions) {
	o.ClusterStateReloadInterval = ClusterStateReloadInterval
	o.ReadTimeout = ClusterReadTimeout
}
