package suppress

import (
	"strings"
	"unicode"
)

// What an inbound message says, the attribute keyword of INBOUND_TOPIC.
const (
	KeywordStop  = "stop"  // put the sender on the list
	KeywordStart = "start" // take the sender off it
	KeywordHelp  = "help"  // the application answers
	KeywordNone  = "none"
)

// Keywords are the words that say STOP, START and HELP, upper case.
type Keywords struct {
	OptOut, OptIn, Help []string
}

// DefaultKeywords are the FCC's and CTIA's words (docs/suppressions.md).
var DefaultKeywords = Keywords{
	OptOut: []string{"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "REVOKE", "OPTOUT", "OPT OUT"},
	OptIn:  []string{"START", "UNSTOP", "YES"},
	Help:   []string{"HELP", "INFO"},
}

// Or is k with each list it leaves nil taken from d: an account's own
// words, the defaults for the lists it does not set.
func (k Keywords) Or(d Keywords) Keywords {
	for _, l := range []struct{ own, def *[]string }{{&k.OptOut, &d.OptOut}, {&k.OptIn, &d.OptIn}, {&k.Help, &d.Help}} {
		if *l.own == nil {
			*l.own = *l.def
		}
	}
	return k
}

// Keyword reads body: after trimming spaces and punctuation and ignoring
// case, a body that is a keyword, or begins with one followed by a space
// or punctuation ("Stop. Thank you", "stop please", "STOP 12345"), says
// it; optOutType, Twilio's OptOutType when present, wins.
func (k Keywords) Keyword(body, optOutType string) string {
	switch strings.ToUpper(strings.TrimSpace(optOutType)) {
	case "STOP":
		return KeywordStop
	case "START":
		return KeywordStart
	case "HELP":
		return KeywordHelp
	}
	text := strings.ToUpper(strings.TrimFunc(body, notWord))
	for _, c := range []struct {
		words []string
		is    string
	}{{k.OptOut, KeywordStop}, {k.OptIn, KeywordStart}, {k.Help, KeywordHelp}} {
		for _, w := range c.words {
			if rest, ok := strings.CutPrefix(text, w); ok && (rest == "" || notWord(rune(rest[0]))) {
				return c.is
			}
		}
	}
	return KeywordNone
}

// notWord is a space or a punctuation mark.
func notWord(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) || unicode.IsSymbol(r) }
