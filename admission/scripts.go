package admission

import (
	"embed"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/luapart"
	"smsdispatcher/internal/scriptop"
)

// scriptFS holds the scripts as files, for the test that checks their
// headers against their calls.
//
//go:embed *.lua
var scriptFS embed.FS

// The Lua scripts of the package, each opening with its KEYS/ARGV/Returns
// contract (the admission script's parts each open with theirs:
// compose.go). Each runs with EVALSHA, falling back to EVAL on NOSCRIPT.
//
// Each declares its flags (Redis 7's "#!lua" line), for a full Redis
// (maxmemory reached, noeviction): a script without flags is refused
// whole, before it runs, so that the admission script admits nothing, takes no claim,
// lease or TAT, and the Limiter decides in its fallback. Without the line
// Redis would refuse only a script's first write that may grow memory, and
// let the rest through once any write was done: the admission script, which trims
// expired leases first, would go on admitting past maxmemory while
// finish.lua, whose first write is the record, was refused. finish.lua and
// release.lua (allow-oom) settle what Redis admitted before it filled: a
// record per admitted send (and its story), leases ended, claims given
// back (the ledger's receipt.lua and giveback.lua are refused whole:
// ledger/scripts.go). pause.lua (no-writes) only reads.
var (
	// admitFull is the admission script with every part in: the one whose
	// SHA ScriptHash(OpAdmit) gives. A Limiter's classes run the variant
	// of their parts (partsOf).
	admitFull = admitScript(allParts)

	//go:embed penalty.lua
	penaltyFile   string
	penaltyLua    = luapart.Shared(penaltyFile) // with the shared helpers it marks
	penaltyScript = redis.NewScript(penaltyLua)

	//go:embed pause.lua
	pauseLua    string
	pauseScript = redis.NewScript(pauseLua)

	//go:embed resume.lua
	resumeFile   string
	resumeLua    = luapart.Shared(resumeFile) // with the shared helpers it marks
	resumeScript = redis.NewScript(resumeLua)

	//go:embed override.lua
	overrideLua    string
	overrideScript = redis.NewScript(overrideLua)

	//go:embed claim.lua
	claimLua    string
	claimScript = redis.NewScript(claimLua)

	finishLua    = finishParts.Compose(scriptParts) // parts.go
	finishScript = redis.NewScript(finishLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed health.lua
	healthLua    string
	healthScript = redis.NewScript(healthLua)

	//go:embed forget.lua
	forgetLua    string
	forgetScript = redis.NewScript(forgetLua)

	//go:embed learned.lua
	learnedLua    string
	learnedScript = redis.NewScript(learnedLua)

	//go:embed pool.lua
	poolLua    string
	poolScript = redis.NewScript(poolLua)
)

// Operations, one per script: the names scriptop.Of gives.
const (
	OpAdmit    = "admit"    // the admission script (compose.go): a send slot, and the id's claim, lease and wake ticket
	OpPenalty  = "penalty"  // penalty.lua: a 429's Retry-After, or an account-level pause, for every process
	OpResume   = "resume"   // resume.lua: an account-level pause, or a 429 penalty, ended early
	OpPause    = "pause"    // pause.lua: whether an account-level pause still holds
	OpOverride = "override" // override.lua: an operator's rate override
	OpClaim    = "claim"    // claim.lua: an id's send claim
	OpFinish   = "finish"   // finish.lua: an id's record (sent, refused, rejected, claim given back) and the lease's end
	OpRelease  = "release"  // release.lua: an id's claim given back
	// Not per message: the health of an idle account (at most one a
	// heartbeat), and the operator's commands.
	OpHealth = "health" // health.lua: an idle account's health
	OpForget = "forget" // forget.lua: a refusal's record cleared for a replay
	OpPool   = "pool"   // pool.lua: a sender pool's indexes built (a new pool, or once a day)
)

func init() { registerOps() }

// registerOps registers each script by its operation: scriptop.Of names
// their calls.
func registerOps() {
	for op, src := range map[string]string{
		OpAdmit: admitFull.src, OpPenalty: penaltyLua, OpResume: resumeLua, OpPause: pauseLua, OpOverride: overrideLua,
		OpClaim: claimLua, OpFinish: finishLua, OpRelease: releaseLua, OpHealth: healthLua, OpForget: forgetLua,
		OpPool: poolLua,
	} {
		scriptop.Register(op, src)
	}
}
