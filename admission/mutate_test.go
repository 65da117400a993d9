package admission

import (
	"os"
	"path/filepath"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/luapart"
)

// Under the mutation check (tools/cmd/mutate), a mutant of a script alone
// runs this package's tests with SMS_MUTATE_SCRIPTS naming a directory of
// the scripts (and admit/, the admission script's parts), one of them mutated: the scripts are read from there, so
// that every such mutant runs one test binary instead of building its own.
func init() {
	dir := os.Getenv("SMS_MUTATE_SCRIPTS")
	if dir == "" {
		return
	}
	scripts := map[string]struct {
		src    *string
		script **redis.Script
	}{
		"penalty.lua": {&penaltyLua, &penaltyScript},
		"pause.lua":   {&pauseLua, &pauseScript}, "resume.lua": {&resumeLua, &resumeScript},
		"override.lua": {&overrideLua, &overrideScript}, "claim.lua": {&claimLua, &claimScript},
		"release.lua": {&releaseLua, &releaseScript},
		"forget.lua":  {&forgetLua, &forgetScript},
		"learned.lua": {&learnedLua, &learnedScript}, "pool.lua": {&poolLua, &poolScript},
		"health.lua": {&healthLua, &healthScript},
	}
	files, _ := scriptFS.ReadDir(".")
	for _, f := range files {
		if _, ok := scripts[f.Name()]; !ok {
			panic("SMS_MUTATE_SCRIPTS: " + f.Name() + " is not read from it: add it above")
		}
	}
	for name, s := range scripts {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			panic(err)
		}
		src := luapart.Shared(string(b))
		*s.src, *s.script = src, redis.NewScript(src)
	}
	// The composed scripts' parts, in their directories of the copy.
	scriptParts = os.DirFS(dir)
	finishLua = finishParts.Compose(scriptParts)
	finishScript = redis.NewScript(finishLua)
	// The admission script's parts, in admit/ of the copy.
	partFiles = os.DirFS(filepath.Join(dir, "admit"))
	resetAdmitScripts()
	admitFull = admitScript(allParts)
	registerOps()
}
