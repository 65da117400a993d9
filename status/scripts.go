package status

import (
	_ "embed"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/luapart"
	"smsdispatcher/internal/scriptop"
)

// The package's Lua scripts, each opening with its KEYS/ARGV/Returns
// contract; each runs with EVALSHA, falling back to EVAL on NOSCRIPT.
// heartbeat.lua declares no flags: on a full Redis (noeviction) it is
// refused whole. processes.lua and status.lua (no-writes) only read, run
// with EVALSHA_RO so that Redis refuses any write they would make.
var (
	//go:embed heartbeat.lua
	heartbeatLua    string
	heartbeatScript = redis.NewScript(heartbeatLua)

	//go:embed processes.lua
	processesLua    string
	processesScript = redis.NewScript(processesLua)

	//go:embed status.lua
	statusFile string
	// statusLua is status.lua with the shared helpers it marks.
	statusLua    = luapart.Shared(statusFile)
	statusScript = redis.NewScript(statusLua)
)

// Operations, one per script: the names scriptop.Of gives. None is per
// message: a process's heartbeat is once a second, whatever its accounts.
const (
	OpHeartbeat = "heartbeat" // heartbeat.lua: a process alive, and its state on each account
	OpProcesses = "processes" // processes.lua: the processes' registry `dispatcher status` reads
	OpStatus    = "status"    // status.lua: `dispatcher status`'s read of an account
)

func init() {
	scriptop.Register(OpHeartbeat, heartbeatLua)
	scriptop.Register(OpProcesses, processesLua)
	scriptop.Register(OpStatus, statusLua)
}
