package provider

import (
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// defaultAlphabet is the GSM 03.38 default alphabet in table order, escape
// left out (3GPP TS 23.038 section 6.2.1); extensionTable is its extension
// table. Twilio's src/libs/UnicodeToGSM.ts maps the same 127 + 10 characters.
const (
	defaultAlphabet = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?" +
		"¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
	extensionTable = "\f^{}\\[~]|€"
)

// cycle repeats the ASCII string s to n bytes.
func cycle(s string, n int) string { return strings.Repeat(s, n/len(s)+1)[:n] }

type segmentsTest struct {
	name, body string
	n          int
	enc        Encoding
}

func TestSegments(t *testing.T) {
	rep := strings.Repeat
	tests := []segmentsTest{
		// A message is at least one segment (Segments' doc; Twilio's
		// calculator starts with one empty segment).
		{"empty", "", 1, GSM7},

		// 160 septets in one segment, 153 per segment beyond (Twilio's
		// what-sms-character-limit; Vonage's concatenation-and-encoding).
		{"ascii 160", rep("a", 160), 1, GSM7},
		{"ascii 161", rep("a", 161), 2, GSM7},
		{"ascii 306 = 2*153", rep("a", 306), 2, GSM7},
		{"ascii 307", rep("a", 307), 3, GSM7},
		{"ascii 459 = 3*153", rep("a", 459), 3, GSM7},
		{"ascii 460", rep("a", 460), 4, GSM7},

		// An extension character is escape + character, 2 septets (3GPP TS
		// 23.038 section 6.2.1.1; Twilio's UnicodeToGSM.ts maps each to two
		// codes).
		{"158 + € = 160 septets", rep("a", 158) + "€", 1, GSM7},
		{"159 + € = 161 septets", rep("a", 159) + "€", 2, GSM7},
		{"^ + 159 = 161 septets", "^" + rep("a", 159), 2, GSM7},
		{"80 € = 160 septets", rep("€", 80), 1, GSM7},
		{"81 € = 162 septets", rep("€", 81), 2, GSM7},
		{"extension table x8 = 160 septets", rep(extensionTable, 8), 1, GSM7},
		{"extension table x8 + 1 = 161 septets", rep(extensionTable, 8) + "a", 2, GSM7},
		// An escape sequence is not split: 152 septets, then € does not fit
		// in the 153rd, so it opens segment 2 (Twilio's Segment.ts moves
		// whole characters). 306 septets then take 3 segments, not 2.
		{"152 + € + 151 = 305 septets", rep("a", 152) + "€" + rep("a", 151), 2, GSM7},
		{"152 + € + 152 = 306 septets, € moves", rep("a", 152) + "€" + rep("a", 152), 3, GSM7},
		{"153 + € + 151 = 306 septets, no straddle", rep("a", 153) + "€" + rep("a", 151), 2, GSM7},
		{"152 + ^ + 152, ^ moves", rep("a", 152) + "^" + rep("a", 152), 3, GSM7},

		// The whole default alphabet is GSM-7 (3GPP TS 23.038).
		{"default alphabet, 127 septets", defaultAlphabet, 1, GSM7},
		{"default alphabet + extension table, 147 septets", defaultAlphabet + extensionTable, 1, GSM7},
		// Greek capitals of the default alphabet stay GSM-7, 1 septet each.
		{"Greek in the table x16 = 160", rep("ΔΦΓΛΩΠΨΣΘΞ", 16), 1, GSM7},
		{"Greek in the table x16 + 1 = 161", rep("ΔΦΓΛΩΠΨΣΘΞ", 16) + "Δ", 2, GSM7},
		// Greek letters outside it (lower case; capital alpha, which looks
		// like A) are UCS-2.
		{"Greek lower case", "δ", 1, UCS2},
		{"Greek capital alpha", "Α", 1, UCS2},

		// Only Ç is in the table, not ç; backtick is not in it (3GPP TS
		// 23.038; Twilio's UnicodeToGSM.ts has 0x00c7 and neither 0x00e7
		// nor 0x0060).
		{"Ç is GSM-7", "Ç", 1, GSM7},
		{"ç is UCS-2", "ç", 1, UCS2},
		{"ç makes 159 ascii UCS-2, 160 units", rep("a", 159) + "ç", 3, UCS2},
		{"backtick is UCS-2", "`", 1, UCS2},
		{"69 ascii + backtick = 70 units", rep("a", 69) + "`", 1, UCS2},
		{"70 ascii + backtick = 71 units", rep("a", 70) + "`", 2, UCS2},
		{"no-break space is UCS-2", "a\u00a0b", 1, UCS2},
		{"curly apostrophe is UCS-2", "it’s", 1, UCS2},
		{"DEL is UCS-2", "\x7f", 1, UCS2},
		{"tab is UCS-2", "\t", 1, UCS2},

		// 70 UCS-2 code units in one segment, 67 beyond; a character
		// outside the BMP is a surrogate pair, 2 units (Twilio's
		// what-is-ucs-2-character-encoding; Vonage's
		// concatenation-and-encoding).
		{"35 emoji = 70 units", rep("😀", 35), 1, UCS2},
		{"36 emoji = 72 units", rep("😀", 36), 2, UCS2},
		{"67 emoji = 134 units = 2*67", rep("😀", 67), 3, UCS2},
		// A surrogate pair is not split: after 66 units the emoji does not
		// fit in the 67th, so it opens segment 2; 134 units then take 3.
		{"65 + emoji + 66 = 133 units", rep("a", 65) + "😀" + rep("a", 66), 2, UCS2},
		{"66 + emoji + 66 = 134 units, emoji moves", rep("a", 66) + "😀" + rep("a", 66), 3, UCS2},
		{"67 + emoji + 65 = 134 units, no straddle", rep("a", 67) + "😀" + rep("a", 65), 2, UCS2},
		// GSM-7 characters take 1 unit in UCS-2, extension ones included.
		{"emoji + 68 ] = 70 units", "😀" + rep("]", 68), 1, UCS2},

		// Japanese is in the BMP: one unit a character.
		{"70 Japanese", rep("あ", 70), 1, UCS2},
		{"71 Japanese", rep("あ", 71), 2, UCS2},
		{"134 Japanese = 2*67", rep("あ", 134), 2, UCS2},
		{"135 Japanese", rep("あ", 135), 3, UCS2},

		// Invalid UTF-8: each bad byte is U+FFFD, 1 unit (Segments' doc).
		{"invalid byte", "\xff", 1, UCS2},
		{"69 + invalid byte = 70 units", rep("a", 69) + "\xff", 1, UCS2},
		{"70 + invalid byte = 71 units", rep("a", 70) + "\xff", 2, UCS2},
		{"truncated emoji = 3 bad bytes, 67 + 3 = 70 units", rep("a", 67) + "\xf0\x9f\x98", 1, UCS2},
		{"truncated emoji = 3 bad bytes, 68 + 3 = 71 units", rep("a", 68) + "\xf0\x9f\x98", 2, UCS2},
		{"encoded surrogate = 3 bad bytes", rep("a", 68) + "\xed\xa0\x80", 2, UCS2},
		{"U+FFFD itself", "\uFFFD", 1, UCS2},

		// Twilio's message-segment-calculator, tests/index.test.js.
		{"Twilio: GSM-7 in one segment", cycle("1234567890", 160), 1, GSM7},
		{"Twilio: GSM-7 in two segments", cycle("1234567890", 161), 2, GSM7},
		{"Twilio: GSM-7 in three segments", cycle("1234567890", 307), 3, GSM7},
		{"Twilio: UCS-2 message in one segment", "😜" + cycle("2345678901", 68), 1, UCS2},
		{"Twilio: UCS-2 message in two segments", "😜" + cycle("2345678901", 69), 2, UCS2},
		{"Twilio: UCS-2 message in three segments", "😜" + cycle("2345678901", 133), 3, UCS2},
		{"Twilio: flag in one segment", "🇮🇹" + cycle("2345678901", 66), 1, UCS2},
		{"Twilio: flag in two segments", "🇮🇹" + cycle("2345678901", 67), 2, UCS2},
		{"Twilio: rainbow flag in one segment", "🏳️\u200d🌈" + cycle("2345678901", 64), 1, UCS2},
		{"Twilio: rainbow flag in two segments", "🏳️\u200d🌈" + cycle("2345678901", 65), 2, UCS2},
		{"Twilio: UCS-2 with GSM special characters, one segment", "😀" + rep("]", 68), 1, UCS2},
		{"Twilio: UCS-2 with GSM special characters, two segments", "😀" + rep("]", 69), 2, UCS2},
		{"Twilio: CRLF line breaks", "\rabcde\r\n123", 1, GSM7},
		{"Twilio: LF line breaks", "\nabcde\n\n123\n", 1, GSM7},
		{"Twilio: triple accents, one segment", "e\u0301\u0301\u0301" + rep("a", 66), 1, UCS2},
		{"Twilio: triple accents, two segments", "e\u0301\u0301\u0301" + rep("a", 67), 2, UCS2},
	}
	// Twilio's tests/index.test.js, GSM-7 Escape Characters: escape
	// character + 158 digits is one segment, + 159 two.
	for _, r := range "|^€{}[]~\\" {
		c := string(r)
		tests = append(tests,
			segmentsTest{"Twilio: one segment with " + c, c + cycle("1234567890", 158), 1, GSM7},
			segmentsTest{"Twilio: two segments with " + c, c + cycle("1234567890", 159), 2, GSM7},
		)
	}
	// Twilio's tests/index.test.js, One grapheme UCS-2 characters: 70 of
	// them are one segment, 71 two.
	for _, r := range "ÁÚúçíÍóÓ" {
		c := string(r)
		tests = append(tests,
			segmentsTest{"Twilio: 70 " + c, rep(c, 70), 1, UCS2},
			segmentsTest{"Twilio: 71 " + c, rep(c, 71), 2, UCS2},
		)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, enc := Segments(tt.body)
			if n != tt.n || enc != tt.enc {
				t.Errorf("Segments(%q) = %d, %v; want %d, %v", tt.body, n, enc, tt.n, tt.enc)
			}
		})
	}
}

// TestSegmentsAlphabet checks every code point: the characters of
// defaultAlphabet take 1 septet, those of extensionTable 2, and all others
// make a body UCS-2.
func TestSegmentsAlphabet(t *testing.T) {
	if n := utf8.RuneCountInString(defaultAlphabet); n != 127 {
		t.Fatalf("defaultAlphabet has %d characters; want 127 (128 less escape)", n)
	}
	if n := utf8.RuneCountInString(extensionTable); n != 10 {
		t.Fatalf("extensionTable has %d characters; want 10", n)
	}
	for r := rune(0); r <= utf8.MaxRune; r++ {
		c := string(r) // U+FFFD for a surrogate, which is not in the tables
		want, wantEnc := 1, UCS2
		switch {
		case strings.ContainsRune(defaultAlphabet, r):
			want, wantEnc = 160, GSM7
		case strings.ContainsRune(extensionTable, r):
			want, wantEnc = 80, GSM7
		}
		// want copies of r fill one segment exactly; one more needs a second.
		if n, enc := Segments(strings.Repeat(c, want)); n != 1 || enc != wantEnc {
			t.Errorf("Segments(%d x %U) = %d, %v; want 1, %v", want, r, n, enc, wantEnc)
		}
		if wantEnc == GSM7 {
			if n, _ := Segments(strings.Repeat(c, want+1)); n != 2 {
				t.Errorf("Segments(%d x %U) = %d; want 2", want+1, r, n)
			}
		}
	}
}

func TestSegmentsAllocs(t *testing.T) {
	for _, body := range benchBodies {
		if a := testing.AllocsPerRun(100, func() { Segments(body.body) }); a != 0 {
			t.Errorf("Segments(%s) allocates %v times; want 0", body.name, a)
		}
	}
}

func TestSegmentsEncodingString(t *testing.T) {
	for e, want := range map[Encoding]string{GSM7: "GSM-7", UCS2: "UCS-2", 7: "Encoding(7)"} {
		if got := e.String(); got != want {
			t.Errorf("Encoding(%d).String() = %q; want %q", int(e), got, want)
		}
	}
}

func FuzzSegments(f *testing.F) {
	for _, s := range []string{
		"", "a", strings.Repeat("a", 161), strings.Repeat("a", 152) + "€" + strings.Repeat("a", 152),
		strings.Repeat("😀", 36), strings.Repeat("a", 66) + "😀" + strings.Repeat("a", 66),
		strings.Repeat("あ", 135), defaultAlphabet + extensionTable, "ç`", "\xff\xf0\x9f\x98", "\xed\xa0\x80",
		strings.Repeat("{", 81), strings.Repeat("a€", 200),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		n, enc := Segments(body)

		gsm := true
		septets, units := 0, 0
		for _, r := range body {
			switch {
			case strings.ContainsRune(defaultAlphabet, r):
				septets++
			case strings.ContainsRune(extensionTable, r):
				septets += 2
			default:
				gsm = false
			}
			units += utf16.RuneLen(r)
		}
		wantEnc := UCS2
		if gsm {
			wantEnc = GSM7
		}
		if enc != wantEnc {
			t.Fatalf("Segments(%q) encoding = %v; want %v", body, enc, wantEnc)
		}

		// n segments hold the body, and n-1 would not: each segment but the
		// last was closed by a character (at most 2 units) that did not fit.
		size, single, multi := units, ucs2Single, ucs2Multi
		if enc == GSM7 {
			size, single, multi = septets, gsm7Single, gsm7Multi
		}
		switch {
		case n < 1:
			t.Fatalf("Segments(%q) = %d; want at least 1", body, n)
		case n == 1 && size > single:
			t.Fatalf("Segments(%q) = 1 for %d units; one segment holds %d", body, size, single)
		case n > 1 && size <= single:
			t.Fatalf("Segments(%q) = %d for %d units, which fit in one segment", body, n, size)
		case n > 1 && (size > multi*n || size <= (multi-1)*(n-1)):
			t.Fatalf("Segments(%q) = %d for %d units; want %d*(n-1) < units <= %d*n", body, n, size, multi-1, multi)
		}

		if want := twilioSegments(body, enc); n != want {
			t.Fatalf("Segments(%q) = %d; Twilio's algorithm gives %d", body, n, want)
		}
	})
}

// twilioSegments counts segments as Twilio's message-segment-calculator builds
// them (src/libs/SegmentedMessage.ts _buildSegments, src/libs/Segment.ts
// addHeader), by code point rather than by grapheme: a segment is 1120 bits;
// when a character does not fit, a new segment with a 48-bit header opens
// and, the first time, the previous segment gets a header too and hands its
// trailing characters on until it fits.
func twilioSegments(body string, enc Encoding) int {
	const maxBits, headerBits = 1120, 48
	type segment struct {
		header bool
		chars  []int // bits of each character
	}
	bits := func(s *segment) int {
		b := 0
		if s.header {
			b = headerBits
		}
		for _, c := range s.chars {
			b += c
		}
		return b
	}
	segs := []*segment{{}}
	for _, r := range body {
		c := 16 * utf16.RuneLen(r)
		if enc == GSM7 {
			c = 7 * septets(r)
		}
		cur := segs[len(segs)-1]
		if maxBits-bits(cur) < c {
			next := &segment{header: true}
			if !cur.header {
				cur.header = true
				for maxBits-bits(cur) < 0 {
					last := cur.chars[len(cur.chars)-1]
					cur.chars = cur.chars[:len(cur.chars)-1]
					next.chars = append([]int{last}, next.chars...)
				}
			}
			segs = append(segs, next)
			cur = next
		}
		cur.chars = append(cur.chars, c)
	}
	return len(segs)
}

// benchBodies are 400-character bodies.
var benchBodies = []struct{ name, body string }{
	{"GSM-7", strings.Repeat("0123456789", 40)},
	{"GSM-7 extension", strings.Repeat("price: 9€ ", 40)},
	{"UCS-2 at the end", strings.Repeat("a", 399) + "😀"},
	{"UCS-2 Japanese", strings.Repeat("こんにちは世界です。", 40)},
}

func BenchmarkSegments(b *testing.B) {
	for _, bb := range benchBodies {
		if n := utf8.RuneCountInString(bb.body); n != 400 {
			b.Fatalf("%s body has %d characters; want 400", bb.name, n)
		}
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.body)))
			for b.Loop() {
				Segments(bb.body)
			}
		})
	}
}
