package admission

import (
	"embed"
	"io/fs"
	"strings"

	"smsdispatcher/internal/luapart"
)

// finish.lua is composed of parts as the admission script is (compose.go),
// with luapart's composer: a directory holds the script's head.lua (its
// flags line and what the whole returns) and one file per mechanism, its
// contract at the top, its code in sections by phase. Unlike the
// admission script's, every part is always in.
//
//go:embed finish/*.lua
var embeddedScriptParts embed.FS

// scriptParts holds the composed scripts' files; the mutation check reads
// them from a copy instead (mutate_test.go).
var scriptParts fs.FS = embeddedScriptParts

// A partsScript is a script composed of the parts in its directory.
type partsScript struct {
	dir    string
	phases []string
	parts  []string // in the order their sections run within each phase
}

// finishParts are finish.lua's: the arguments read and checked, the
// writes, then the health's count, which replies.
var finishParts = partsScript{"finish", []string{"read", "write", "reply"}, []string{"record", "sent", "lease", "story", "health"}}

// read returns part name's file in files, with the shared helpers it marks.
func (p partsScript) read(files fs.FS, name string) string {
	b, err := fs.ReadFile(files, p.dir+"/"+name+".lua")
	if err != nil {
		panic(err)
	}
	return luapart.Shared(string(b))
}

// compose returns the script of p's parts in files.
func (p partsScript) compose(files fs.FS) string {
	parts := make([]luapart.Part, len(p.parts))
	for i, name := range p.parts {
		parts[i] = luapart.Part{Name: p.dir + "/" + name, Sections: luapart.Sections(p.dir+"/"+name, p.read(files, name), p.phases)}
	}
	return luapart.Compose(p.read(files, "head"), p.phases, parts)
}

// contracts returns p's head and parts' files one after the other: each
// part's contract gives the KEYS and ARGV it reads.
func (p partsScript) contracts(files fs.FS) string {
	var b strings.Builder
	for _, name := range append([]string{"head"}, p.parts...) {
		b.WriteString(p.read(files, name))
	}
	return b.String()
}
