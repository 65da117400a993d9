package admission

import (
	"embed"
	"io/fs"
	"strings"

	"smsdispatcher/internal/luapart"
)

// finish.lua, receipt.lua and story.lua are composed of parts as the
// admission script is (compose.go), with luapart's composer: a directory
// holds the script's head.lua (its flags line and what the whole returns)
// and one file per mechanism, its contract at the top, its code in
// sections by phase. Unlike the admission script's, every part is always
// in. story.lua finds a story with receipt.lua's find.lua.
//
//go:embed finish/*.lua receipt/*.lua story/*.lua
var embeddedScriptParts embed.FS

// scriptParts holds the composed scripts' files; the mutation check reads
// them from a copy instead (mutate_test.go).
var scriptParts fs.FS = embeddedScriptParts

// A partsScript is a script composed of parts, each named by its path
// without ".lua".
type partsScript struct {
	head   string // the flags line and the whole script's contract, written first
	phases []string
	parts  []string // in the order their sections run within each phase
}

var (
	// finishParts are finish.lua's: the arguments read and checked, the
	// writes, then the health's count, which replies.
	finishParts = partsScript{"finish/head", []string{"read", "write", "reply"},
		[]string{"finish/record", "finish/sent", "finish/lease", "finish/story", "finish/health"}}
	// receiptParts are receipt.lua's: the arguments checked, the helpers
	// defined, the published events cleared and the counts written, then
	// the sweep or the fold, each of which replies.
	receiptParts = partsScript{"receipt/head", []string{"check", "define", "write", "sweep", "fold"},
		[]string{"receipt/args", "receipt/find", "receipt/owed", "receipt/counts", "receipt/route", "receipt/sweep", "receipt/fold"}}
	// storyParts are story.lua's: the story found as a receipt finds it.
	storyParts = partsScript{"story/head", []string{"check", "define", "read"}, []string{"receipt/find", "story/read"}}
)

// read returns the part at path in files, with the shared helpers it
// marks.
func read(files fs.FS, path string) string {
	b, err := fs.ReadFile(files, path+".lua")
	if err != nil {
		panic(err)
	}
	return luapart.Shared(string(b))
}

// compose returns the script of p's parts in files.
func (p partsScript) compose(files fs.FS) string {
	parts := make([]luapart.Part, len(p.parts))
	for i, path := range p.parts {
		parts[i] = luapart.Part{Name: path, Sections: luapart.Sections(path, read(files, path), p.phases)}
	}
	return luapart.Compose(read(files, p.head), p.phases, parts)
}

// contracts returns p's head and parts' files one after the other: each
// part's contract gives the KEYS and ARGV it reads.
func (p partsScript) contracts(files fs.FS) string {
	var b strings.Builder
	for _, path := range append([]string{p.head}, p.parts...) {
		b.WriteString(read(files, path))
	}
	return b.String()
}
