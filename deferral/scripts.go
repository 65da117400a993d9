package deferral

import (
	_ "embed"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/scriptop"
)

// The store's scripts, each on the keys of one class's tag (one slot).
var (
	//go:embed defer.lua
	deferLua string
	//go:embed claim.lua
	claimLua string
	//go:embed remove.lua
	removeLua string
	//go:embed list.lua
	listLua string
	//go:embed cap.lua
	capLua string
	//go:embed uncap.lua
	uncapLua string
	//go:embed due.lua
	dueLua string
	//go:embed stats.lua
	statsLua string
	//go:embed get.lua
	getLua string
	//go:embed ended.lua
	endedLua string
	//go:embed trace.lua
	traceLua string

	deferScript  = redis.NewScript(deferLua)
	claimScript  = redis.NewScript(claimLua)
	removeScript = redis.NewScript(removeLua)
	listScript   = redis.NewScript(listLua)
	capScript    = redis.NewScript(capLua)
	uncapScript  = redis.NewScript(uncapLua)
	dueScript    = redis.NewScript(dueLua)
	statsScript  = redis.NewScript(statsLua)
	getScript    = redis.NewScript(getLua)
	endedScript  = redis.NewScript(endedLua)
	traceScript  = redis.NewScript(traceLua)
)

// Operations, one per script, for the Redis-calls figures.
const (
	OpDefer  = "defer"
	OpClaim  = "deferred_claim"
	OpRemove = "deferred_remove"
	OpList   = "deferred_list"
	OpCap    = "cap"
	OpUncap  = "cap_give_back"
	OpDue    = "deferred_due"
	OpStats  = "deferred_stats"
	OpGet    = "deferred_get"
	OpEnded  = "deferred_ended"
	OpTrace  = "deferred_trace"
)

func init() {
	scriptop.Register(OpDefer, deferLua)
	scriptop.Register(OpClaim, claimLua)
	scriptop.Register(OpRemove, removeLua)
	scriptop.Register(OpList, listLua)
	scriptop.Register(OpCap, capLua)
	scriptop.Register(OpUncap, uncapLua)
	scriptop.Register(OpDue, dueLua)
	scriptop.Register(OpStats, statsLua)
	scriptop.Register(OpGet, getLua)
	scriptop.Register(OpEnded, endedLua)
	scriptop.Register(OpTrace, traceLua)
}
