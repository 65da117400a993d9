// Package luapart composes Lua scripts from parts: files that each hold
// one mechanism, its contract at the top, split into sections by phase
// ("-- @<phase>" lines); a script is the sections of its parts, phase
// by phase, in the parts' order. It also holds the helpers several
// scripts share (num.lua), written once and put in by Shared.
//
// Invariant: a composed script is the same text for the same parts, so
// its SHA-1 is stable across processes of one version; the parts are
// read once, never per call. A helper no part of a script calls is left
// out of it (Prune): Lua makes a script's local functions anew on every
// call.
package luapart

import (
	_ "embed"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

//go:embed num.lua
var numLua string

// sharedParts are the shared helpers by the mark that stands for each.
var sharedParts = map[string]string{"--@num\n": numLua}

// Shared returns src with each shared helper's mark ("--@num" alone on a
// line) replaced by the helper. A script marks the place where the
// helper is defined, after its contract and before its first use.
func Shared(src string) string {
	for mark, part := range sharedParts {
		src = strings.ReplaceAll(src, mark, part)
	}
	return src
}

var sectionLine = regexp.MustCompile(`(?m)^-- @(\w+)\n`)

// Sections splits part name's source into its sections by phase; what
// comes before the first is its contract. A phase not in phases, or
// twice, is a bug of the part: it panics.
func Sections(name, src string, phases []string) map[string]string {
	marks := sectionLine.FindAllStringSubmatchIndex(src, -1)
	out := map[string]string{}
	for i, m := range marks {
		phase := src[m[2]:m[3]]
		end := len(src)
		if i+1 < len(marks) {
			end = marks[i+1][0]
		}
		if _, dup := out[phase]; dup || !slices.Contains(phases, phase) {
			panic(fmt.Sprintf("%s.lua: section %q unknown or twice", name, phase))
		}
		out[phase] = strings.TrimRight(src[m[1]:end], "\n") + "\n"
	}
	return out
}

// A Part is a part's name and its sections by phase.
type Part struct {
	Name     string
	Sections map[string]string
}

// Compose returns head then, phase by phase, each part's section of the
// phase, in parts' order, each after a line naming its part.
func Compose(head string, phases []string, parts []Part) string {
	var b strings.Builder
	b.WriteString(head)
	for _, phase := range phases {
		for _, p := range parts {
			if sec, ok := p.Sections[phase]; ok {
				fmt.Fprintf(&b, "\n-- %s.lua: %s\n%s", p.Name, phase, sec)
			}
		}
	}
	return b.String()
}

// A Script is a script composed of parts in a file system, each named by
// its path without ".lua": its head (the flags line and what the whole
// returns, written first) and its parts, every one always in.
type Script struct {
	Head   string
	Phases []string
	Parts  []string // in the order their sections run within each phase
}

// read returns the part at path in files, with the shared helpers it
// marks.
func read(files fs.FS, path string) string {
	b, err := fs.ReadFile(files, path+".lua")
	if err != nil {
		panic(err)
	}
	return Shared(string(b))
}

// Compose returns the script of s's parts in files.
func (s Script) Compose(files fs.FS) string {
	parts := make([]Part, len(s.Parts))
	for i, path := range s.Parts {
		parts[i] = Part{Name: path, Sections: Sections(path, read(files, path), s.Phases)}
	}
	return Compose(read(files, s.Head), s.Phases, parts)
}

// Contracts returns s's head and parts' files one after the other: each
// part's contract gives the KEYS and ARGV it reads.
func (s Script) Contracts(files fs.FS) string {
	var b strings.Builder
	for _, path := range append([]string{s.Head}, s.Parts...) {
		b.WriteString(read(files, path))
	}
	return b.String()
}

// A helper is a top-level "local function" of a script: its name and where
// its text starts (with the comment lines just above it) and ends.
type helper struct {
	name       string
	start, end int
	pruned     bool
}

// Prune returns src without each top-level helper ("local function name(",
// up to the first "end" at the start of a line after it, with the comment
// lines just above it) that the rest of src, comments aside, never names:
// Lua makes a local function anew on every run of the script, so a helper
// of a part left out would cost every call its closure for nothing. A
// helper only pruned ones named goes too.
func Prune(src string) string {
	var helpers []*helper
	const def = "\nlocal function "
	for from := 0; ; {
		i := strings.Index(src[from:], def)
		if i < 0 {
			break
		}
		i += from + 1
		paren := strings.IndexByte(src[i:], '(')
		end := strings.Index(src[i:], "\nend\n")
		if paren < 0 || end < 0 {
			panic(fmt.Sprintf("luapart: a helper has no end at the start of a line: %.40s", src[i:]))
		}
		h := &helper{name: src[i+len(def)-1 : i+paren], start: i, end: i + end + len("\nend\n")}
		from = h.end - 1
		for h.start > 0 {
			prev := strings.LastIndex(src[:h.start-1], "\n") + 1
			if !strings.HasPrefix(src[prev:h.start], "--") {
				break
			}
			h.start = prev
		}
		helpers = append(helpers, h)
	}
	for pruned := true; pruned; {
		pruned = false
		for _, h := range helpers {
			if !h.pruned && !namedOutside(src, h, helpers) {
				h.pruned, pruned = true, true
			}
		}
	}
	var b strings.Builder
	last := 0
	for _, h := range helpers {
		if h.pruned {
			b.WriteString(src[last:h.start])
			last = h.end
		}
	}
	b.WriteString(src[last:])
	return b.String()
}

// namedOutside reports whether src names h outside h's definition and
// the pruned helpers'.
func namedOutside(src string, h *helper, helpers []*helper) bool {
	last := 0
	for _, o := range helpers {
		if o == h || o.pruned {
			if names(src[last:o.start], h.name) {
				return true
			}
			last = o.end
		}
	}
	return names(src[last:], h.name)
}

// names reports whether code names name (as a whole word, not in a
// comment). It scans with strings.Index: a script's variants are composed
// while it serves.
func names(code, name string) bool {
	for from := 0; ; {
		i := strings.Index(code[from:], name)
		if i < 0 {
			return false
		}
		i += from
		from = i + len(name)
		line := code[strings.LastIndexByte(code[:i], '\n')+1 : i]
		if (i == 0 || !IsNameByte(code[i-1])) && (from == len(code) || !IsNameByte(code[from])) && !strings.Contains(line, "--") {
			return true
		}
	}
}

// IsNameByte reports whether c can be part of a Lua name (or a number).
func IsNameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
