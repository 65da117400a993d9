package admission

import (
	"embed"
	"io/fs"

	"smsdispatcher/internal/luapart"
)

// finish.lua is composed of parts as the admission script is
// (compose.go), with luapart's composer: finish/ holds the script's
// head.lua (its flags line and what the whole returns) and one file per
// mechanism, its contract at the top, its code in sections by phase.
// Unlike the admission script's, every part is always in.
//
//go:embed finish/*.lua
var embeddedScriptParts embed.FS

// scriptParts holds the composed scripts' files; the mutation check reads
// them from a copy instead (mutate_test.go).
var scriptParts fs.FS = embeddedScriptParts

// finishParts are finish.lua's: the arguments read and checked, the
// writes, then the health's count, which replies.
var finishParts = luapart.Script{Head: "finish/head", Phases: []string{"read", "write", "reply"},
	Parts: []string{"finish/record", "finish/sent", "finish/lease", "finish/story", "finish/health"}}
