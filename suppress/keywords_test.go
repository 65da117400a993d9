package suppress

import "testing"

func TestKeyword(t *testing.T) {
	for _, tt := range []struct{ body, optOutType, want string }{
		{"STOP", "", KeywordStop},
		{"  stop ", "", KeywordStop},
		{"Stop. Thank you", "", KeywordStop},
		{"stop please", "", KeywordStop},
		{"STOP 12345", "", KeywordStop},
		{"opt out", "", KeywordStop},
		{"Unsubscribe!", "", KeywordStop},
		{"stopping by later", "", KeywordNone},
		{"please stop", "", KeywordNone},
		{"start", "", KeywordStart},
		{"Yes", "", KeywordStart},
		{"help?", "", KeywordHelp},
		{"hello", "", KeywordNone},
		{"arret", "STOP", KeywordStop}, // Twilio's reading wins
		{"stop", "START", KeywordStart},
		{"", "", KeywordNone},
	} {
		if got := DefaultKeywords.Keyword(tt.body, tt.optOutType); got != tt.want {
			t.Errorf("Keyword(%q, %q) = %q, want %q", tt.body, tt.optOutType, got, tt.want)
		}
	}
	arret := Keywords{OptOut: []string{"ARRET", "ALTO"}}
	if got := arret.Keyword("Arrêt", ""); got != KeywordNone {
		t.Errorf("ARRET's list read Arrêt as %q: accents are the account's to list", got)
	}
	if got := arret.Keyword("alto por favor", ""); got != KeywordStop {
		t.Errorf("an account's own word: %q, want stop", got)
	}
}
