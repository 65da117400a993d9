package provider

import (
	"net/url"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// How an answer is cleaned before it becomes Error.Message. Providers echo
// what they refuse, and not always verbatim: JSON-escaped ("\n", "\u00e9",
// "\/"), cut short, or with the number reformatted. So the answer is read at
// every level of JSON unescaping, each character remembering the bytes of
// the answer it came from, and any run that identifies a secret is taken out
// of the answer as it was sent. Matching on runs rather than on the whole
// secret is what catches a prefix, a suffix or a copy cut at a length limit.
const (
	// runLen is the shortest run of the body that is taken out. 8
	// characters pin a message down (a code and a word of context) yet
	// rarely occur by chance in a provider's own error text; a shorter body
	// is looked for whole.
	runLen = 8
	// minBodyLen is the shortest body (in bytes) that is looked for at all:
	// a shorter one is no secret, and removing it would mangle the text.
	minBodyLen = 4
	// numberRun is the shortest run of the number's digits that is masked:
	// one more than the 4 a masked number shows, so the last 4 alone pass.
	numberRun = 5
	// codeRun is the shortest run of a body's digit group that is masked. A
	// one-time code has 4 to 8 digits and is the body's real secret, but a
	// 6-digit code with a space around it is shorter than runLen.
	codeRun = 4
	// maxUnescape is how many times the answer is unescaped: enough for a
	// body echoed in a JSON string inside a JSON string, and a bound on work.
	maxUnescape = 3
	// maxDigitGap is how many separators may stand between two digits of
	// one group, so that "+81 (90) 1234-5678" is read as one number.
	maxDigitGap = 2
	// withheld replaces an excerpt that still shows a secret after
	// redaction, which only a body built to collide with the labels can do.
	withheld = "[answer withheld: it echoes the message]"
)

// A mark says what becomes of a byte of the answer. Where marks overlap the
// greater one wins: a number inside an echoed body goes with the body.
type mark uint8

const (
	keep      mark = iota
	maskDigit      // the digit becomes '*'
	maskBody       // the run becomes "[body]"
	maskToken      // the run becomes "[redacted]"
)

var labels = [...]string{maskBody: "[body]", maskToken: "[redacted]"}

// secrets is what an excerpt must not show.
type secrets struct {
	texts         []textSecret // the credentials, then the body
	number, codes digitSecret
}

// newSecrets returns the secrets of one Send: the adapter's credentials
// (token, API key and secret), m's body and the digit groups in it, and
// m's number.
func newSecrets(m Message, credentials ...string) *secrets {
	sec := new(secrets)
	for _, c := range credentials {
		// A credential is random: a run of less than half of it gives
		// little away, and a longer run than runLen keeps its incidental
		// digits from swallowing a number that happens to share them. A
		// form-encoded request (Twilio, Vonage) can be echoed encoded.
		for _, form := range encodings(c) {
			sec.texts = append(sec.texts, newTextSecret(form, max(runLen, len(form)/2), maskToken))
		}
	}
	if len(m.Body) >= minBodyLen {
		for _, form := range encodings(m.Body) {
			sec.texts = append(sec.texts, newTextSecret(form, runLen, maskBody))
		}
	}
	var digits []byte
	for i := 0; i < len(m.To); i++ {
		if isDigit(rune(m.To[i])) {
			digits = append(digits, m.To[i])
		}
	}
	sec.number = newDigitSecret(numberRun, 4)
	if len(digits) >= numberRun {
		sec.number.add(digits)
	}
	sec.codes = newDigitSecret(codeRun, 0)
	rs := []rune(m.Body)
	digitGroups(rs, nil, func(idx []int) {
		sec.codes.add(digitsAt(rs, idx))
	})
	return sec
}

// encodings returns s and, when it differs, s as a form encodes it.
func encodings(s string) []string {
	if q := url.QueryEscape(s); q != s {
		return []string{s, q}
	}
	return []string{s}
}

// A textSecret matches any run of n characters of a secret (all of it if
// shorter).
type textSecret struct {
	n    int // 0: nothing to look for
	runs map[string]struct{}
	mark mark
}

func newTextSecret(s string, n int, m mark) textSecret {
	if s == "" {
		return textSecret{}
	}
	// Invalid UTF-8 goes on the wire as U+FFFD (encoding/json), so that is
	// what a provider can echo.
	rs := []rune(s)
	norm := string(rs)
	n = min(n, len(rs))
	t := textSecret{n: n, runs: make(map[string]struct{}, len(rs)-n+1), mark: m}
	off := 0
	ends := make([]int, len(rs))
	for i, r := range rs {
		off += utf8.RuneLen(r)
		ends[i] = off
	}
	start := 0
	for i := 0; i+n <= len(rs); i++ {
		t.runs[norm[start:ends[i+n-1]]] = struct{}{}
		start = ends[i]
	}
	return t
}

// A digitSecret matches any run of n digits of a secret's digit groups,
// ignoring the separators between them.
type digitSecret struct {
	n     int
	show  int            // how many of the secret's last digits may stay visible
	total int            // digits in the secret; only used with show
	runs  map[string]int // run -> its first position in the secret
}

func newDigitSecret(n, show int) digitSecret {
	return digitSecret{n: n, show: show, runs: map[string]int{}}
}

// add adds the runs of one digit group. show only makes sense for a secret
// of one group (the number).
func (d *digitSecret) add(digits []byte) {
	d.total = len(digits)
	for q := 0; q+d.n <= len(digits); q++ {
		if _, ok := d.runs[string(digits[q:q+d.n])]; !ok {
			d.runs[string(digits[q:q+d.n])] = q
		}
	}
}

// hidden reports whether digit k of a run found at position q of the secret
// must be masked: all are, but for the secret's last show digits.
func (d *digitSecret) hidden(q, k int) bool {
	return d.show == 0 || q+k < d.total-d.show
}

// redact returns s with every secret taken out: a run of the body replaced
// by "[body]", of the token by "[redacted]", and each digit of the number
// but its last 4 (and of the body's digit groups) by '*'.
func (sec *secrets) redact(s string) string {
	r := sec.find(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		switch k := r.kind[i]; k {
		case keep:
			b.WriteByte(s[i])
			i++
		case maskDigit:
			if r.star[i] { // one '*' per digit, even one written as "\u0038"
				b.WriteByte('*')
			}
			i++
		default:
			for i < len(s) && r.kind[i] == k {
				i++
			}
			b.WriteString(labels[k])
		}
	}
	return b.String()
}

// shows reports whether s still shows a secret by the rules redact follows.
func (sec *secrets) shows(s string) bool {
	r := sec.find(s)
	for _, k := range r.kind {
		if k != keep {
			return true
		}
	}
	return false
}

// redaction holds the marks for each byte of an answer.
type redaction struct {
	kind []mark
	star []bool // a masked digit starts at this byte
}

func (r *redaction) set(start, end int, k mark) {
	for i := start; i < end; i++ {
		r.kind[i] = max(r.kind[i], k)
	}
}

// A unit is one character of the answer, read at some level of unescaping,
// with the bytes s[start:end] of the answer it came from.
type unit struct {
	r          rune
	start, end int
}

// find marks the secrets in s, read as it is and unescaped up to
// maxUnescape times.
func (sec *secrets) find(s string) *redaction {
	r := &redaction{kind: make([]mark, len(s)), star: make([]bool, len(s))}
	u := make([]unit, 0, len(s))
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		u = append(u, unit{c, i, i + n})
		i += n
	}
	for level := 0; ; level++ {
		sec.mark(u, r)
		if level == maxUnescape {
			break
		}
		var changed bool
		if u, changed = unescape(u); !changed {
			break
		}
	}
	return r
}

// mark marks in r the secrets found in one reading u of the answer.
func (sec *secrets) mark(u []unit, r *redaction) {
	rs := make([]rune, len(u))
	ends := make([]int, len(u)) // ends[i]: end of u[i] in text
	var b strings.Builder
	for i, x := range u {
		rs[i] = x.r
		b.WriteRune(x.r)
		ends[i] = b.Len()
	}
	// The hex digits of "\u0020" are no digits of this reading: the next
	// reading has the character they spell.
	escaped := make([]bool, len(u))
	for i := 0; i < len(u); i++ {
		if _, n := decodeEscape(u[i:]); n > 0 {
			for k := range n {
				escaped[i+k] = true
			}
			i += n - 1
		}
	}
	text := b.String()
	for _, t := range sec.texts {
		start := 0
		for i := 0; t.n > 0 && i+t.n <= len(u); i++ {
			if _, ok := t.runs[text[start:ends[i+t.n-1]]]; ok {
				for _, x := range u[i : i+t.n] {
					r.set(x.start, x.end, t.mark)
				}
			}
			start = ends[i]
		}
	}
	digitGroups(rs, escaped, func(idx []int) {
		digits := digitsAt(rs, idx)
		for _, d := range []*digitSecret{&sec.number, &sec.codes} {
			for p := 0; p+d.n <= len(digits); p++ {
				q, ok := d.runs[string(digits[p:p+d.n])]
				for k := 0; ok && k < d.n; k++ {
					if x := u[idx[p+k]]; d.hidden(q, k) {
						r.set(x.start, x.end, maskDigit)
						r.star[x.start] = true
					}
				}
			}
		}
	})
}

func isDigit(r rune) bool { return '0' <= r && r <= '9' }

func isDigitSeparator(r rune) bool { return strings.ContainsRune(" -.()", r) }

// digitGroups calls f with the indexes of the digits of each group in rs: a
// run of ASCII digits with at most maxDigitGap separators between two. A
// character i with skip[i] set ends a group.
func digitGroups(rs []rune, skip []bool, f func(idx []int)) {
	var idx []int
	gap := 0
	for i, r := range rs {
		switch {
		case isDigit(r) && (skip == nil || !skip[i]):
			idx = append(idx, i)
			gap = 0
		case len(idx) > 0 && isDigitSeparator(r) && gap < maxDigitGap && (skip == nil || !skip[i]):
			gap++
		case len(idx) > 0:
			f(idx)
			idx, gap = nil, 0
		}
	}
	if len(idx) > 0 {
		f(idx)
	}
}

func digitsAt(rs []rune, idx []int) []byte {
	b := make([]byte, len(idx))
	for k, i := range idx {
		b[k] = byte(rs[i])
	}
	return b
}

// unescape decodes the JSON string escapes in u, wherever they stand, and
// reports whether there were any. A lone surrogate becomes U+FFFD, as
// encoding/json decodes it.
func unescape(u []unit) ([]unit, bool) {
	out := make([]unit, 0, len(u))
	changed := false
	for i := 0; i < len(u); {
		r, n := decodeEscape(u[i:])
		if n == 0 {
			out = append(out, u[i])
			i++
			continue
		}
		out = append(out, unit{r, u[i].start, u[i+n-1].end})
		i += n
		changed = true
	}
	return out, changed
}

// decodeEscape returns the character escaped at the start of u and the
// number of units the escape takes, or 0 units if u does not start with one.
func decodeEscape(u []unit) (rune, int) {
	if len(u) < 2 || u[0].r != '\\' {
		return 0, 0
	}
	switch u[1].r {
	case '"', '\\', '/':
		return u[1].r, 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, ok := hex4(u[2:])
		if !ok {
			return 0, 0
		}
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if len(u) >= 12 && u[6].r == '\\' && u[7].r == 'u' {
			if r2, ok := hex4(u[8:]); ok {
				if c := utf16.DecodeRune(r, r2); c != utf8.RuneError {
					return c, 12
				}
			}
		}
		return utf8.RuneError, 6
	}
	return 0, 0
}

func hex4(u []unit) (rune, bool) {
	if len(u) < 4 {
		return 0, false
	}
	var r rune
	for _, x := range u[:4] {
		var v rune
		switch c := x.r; {
		case '0' <= c && c <= '9':
			v = c - '0'
		case 'a' <= c && c <= 'f':
			v = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | v
	}
	return r, true
}
