package provider

// Segments counts as the providers bill. The rules were checked against:
//
//   - Twilio's segment calculator,
//     https://github.com/TwilioDevEd/message-segment-calculator:
//     src/libs/UnicodeToGSM.ts (the 127 default-alphabet characters and the
//     10 extension characters, form feed included, which take escape plus
//     character), src/libs/Segment.ts and src/libs/SegmentedMessage.ts (a
//     segment is 140 octets; each segment of a concatenated message gives 6
//     of them to the user data header; characters fill segments in order,
//     and one that does not fit in what is left of a segment starts the
//     next, so no cut falls inside an escape sequence or a surrogate pair; a
//     message has at least one segment), and
//     tests/index.test.js, whose examples are cases in segments_test.go.
//   - https://www.twilio.com/docs/glossary/what-sms-character-limit and
//     https://www.twilio.com/docs/glossary/what-is-ucs-2-character-encoding:
//     160 GSM-7 characters in one segment, 153 per segment when
//     concatenated; 70 UCS-2 code units, 67 when concatenated; any character
//     outside GSM-7 makes the whole body UCS-2.
//   - https://developer.vonage.com/en/messaging/sms/guides/concatenation-and-encoding
//     and https://api.support.vonage.com/hc/en-us/articles/217491638:
//     the same alphabet, extension table and limits (160/153, 70/67).
//   - The table as 3GPP TS 23.038 (GSM 03.38) section 6.2.1 lays it out,
//     reproduced at https://developers.sinch.com/docs/sms/smpp/message-encoding.
//
// Twilio's calculator also keeps a grapheme cluster of several code points
// (a flag, an emoji ZWJ sequence, a letter and its combining marks) in one
// segment; Segments keeps only a surrogate pair whole, so it may count one
// segment fewer when such a cluster straddles a cut.

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Encoding is how a body goes on the wire.
type Encoding int

const (
	GSM7 Encoding = iota // GSM 03.38 default alphabet plus its extension table
	UCS2                 // anything else: UTF-16 code units
)

// String returns "GSM-7" or "UCS-2".
func (e Encoding) String() string {
	switch e {
	case GSM7:
		return "GSM-7"
	case UCS2:
		return "UCS-2"
	}
	return "Encoding(" + strconv.Itoa(int(e)) + ")"
}

// A segment carries 140 octets; in a concatenated message, 6 of them are the
// user data header.
const (
	gsm7Single = 160 // septets in a message of one segment
	gsm7Multi  = 153 // septets in each segment of a longer message
	ucs2Single = 70  // UTF-16 code units in a message of one segment
	ucs2Multi  = 67  // UTF-16 code units in each segment of a longer message
)

// Segments returns how many message segments body takes and its encoding.
//
// The body is GSM7 if every character is in the GSM 03.38 default alphabet
// or its extension table; a character of the extension table takes two
// septets (escape and character), any other character one. Otherwise the
// body is UCS2 and every character takes one UTF-16 code unit, or two (a
// surrogate pair) outside the Basic Multilingual Plane. Each byte that is not
// valid UTF-8 counts as U+FFFD: one code unit, and UCS2.
//
// A body of at most 160 septets or 70 code units takes one segment. A longer
// one is cut into segments of at most 153 septets or 67 code units, never
// inside an escape sequence or a surrogate pair, so a segment may hold one
// fewer. The empty body takes one segment, GSM7: a message is at least one
// segment.
//
// Segments does not allocate and takes time linear in len(body).
func Segments(body string) (n int, enc Encoding) {
	if n, ok := gsm7Segments(body); ok {
		return n, GSM7
	}
	return UCS2Segments(body), UCS2
}

// gsm7Segments returns the segments body takes in GSM-7, or false if a
// character of body is not in GSM-7.
func gsm7Segments(body string) (n int, ok bool) {
	var s segmenter
	for _, r := range body {
		w := septets(r)
		if w == 0 {
			return 0, false
		}
		s.add(w, gsm7Multi)
	}
	return s.count(gsm7Single), true
}

// UCS2Segments returns the segments body takes sent in UCS-2, whatever its
// characters: Segments' count for a body that is not GSM7, and what a
// provider counts when the sender asks for UCS-2 (Vonage's type=unicode).
func UCS2Segments(body string) int {
	var s segmenter
	for _, r := range body {
		// range yields U+FFFD for invalid UTF-8, never a surrogate, so
		// RuneLen is 1 or 2.
		s.add(utf16.RuneLen(r), ucs2Multi)
	}
	return s.count(ucs2Single)
}

// segmenter fills segments in order with whole characters: a character that
// does not fit in what is left of the open segment starts the next. Its zero
// value has one open, empty segment.
type segmenter struct {
	total  int // units added
	closed int // segments before the open one
	used   int // units in the open segment
}

// add adds a character of w units to segments of size units.
func (s *segmenter) add(w, size int) {
	s.total += w
	if s.used+w > size {
		s.closed++
		s.used = 0
	}
	s.used += w
}

// count returns the number of segments: 1 if all units fit in single.
func (s *segmenter) count(single int) int {
	if s.total <= single {
		return 1
	}
	return s.closed + 1
}

// septets returns how many septets r takes in GSM-7: 1 for a character of the
// GSM 03.38 default alphabet, 2 for one of its extension table, 0 for any
// other.
func septets(r rune) int {
	if r < utf8.RuneSelf {
		return int(asciiSeptets[r])
	}
	switch r {
	case '£', '¥', 'è', 'é', 'ù', 'ì', 'ò', 'Ç', 'Ø', 'ø', 'Å', 'å',
		'Δ', 'Φ', 'Γ', 'Λ', 'Ω', 'Π', 'Ψ', 'Σ', 'Θ', 'Ξ',
		'Æ', 'æ', 'ß', 'É', '¤', '¡', 'Ä', 'Ö', 'Ñ', 'Ü', '§', '¿',
		'ä', 'ö', 'ñ', 'ü', 'à':
		return 1
	case '€':
		return 2
	}
	return 0
}

// asciiSeptets[c] is septets(c) for an ASCII character c.
var asciiSeptets = func() (t [utf8.RuneSelf]uint8) {
	const (
		basic     = "\n\r !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"
		extension = "\f[\\]^{|}~"
	)
	for i := range len(basic) {
		t[basic[i]] = 1
	}
	for i := range len(extension) {
		t[extension[i]] = 2
	}
	return t
}()
