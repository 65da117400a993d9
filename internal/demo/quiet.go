package demo

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/window"
)

// --quiet-hours: the marketing class gets send windows by prefix, as
// ACCOUNTS_FILE's send_hours_by_prefix would give them, and a third of
// the campaign goes to French numbers (+33, Europe/Paris by the number's
// zone). France's window is closed when the demo starts and opens at the
// next whole minute of Paris time at least quietLead ahead: those messages
// are deferred, then released over quietSpread and sent, while the rest
// of the campaign (Japanese numbers, open all day) goes at once.
const (
	quietPrefix = "+33"
	quietZone   = "Europe/Paris"
	quietLead   = 15 * time.Second
	quietSpread = 5 * time.Second
	// quietEvery: every quietEvery-th campaign message goes to France.
	quietEvery = 3
)

// QuietHours is what --quiet-hours set up: France's window and when it
// opens.
type QuietHours struct {
	Prefix, Zone string
	Hours        string    // France's send_hours, in Paris time
	Opens        time.Time // the window's opening, as an instant
}

// quietHours returns cfg with the marketing class's send windows of
// --quiet-hours, decided at now: open all day except to quietPrefix,
// whose window opens at the next whole minute of quietZone's time at
// least quietLead after now, and lasts 12 hours.
func quietHours(cfg config.Settings, now time.Time) (config.Settings, QuietHours, error) {
	loc, err := window.ParseZone(quietZone)
	if err != nil {
		return cfg, QuietHours{}, err
	}
	opens := now.Add(quietLead).In(loc).Truncate(time.Minute)
	if opens.Before(now.Add(quietLead)) {
		opens = opens.Add(time.Minute)
	}
	q := QuietHours{Prefix: quietPrefix, Zone: quietZone, Opens: opens,
		Hours: fmt.Sprintf("%s-%s", opens.Format("15:04"), opens.Add(12*time.Hour).Format("15:04"))}
	france, err := window.ParseHours(q.Hours)
	if err != nil {
		return cfg, QuietHours{}, err
	}
	allDay, err := window.ParseHours("00:00-24:00")
	if err != nil {
		return cfg, QuietHours{}, err
	}
	// default_zone Paris: a French number the library could not place
	// would still be judged in France's hours.
	w := &window.Windows{Rule: window.Rule{Hours: allDay}, ByPrefix: map[string]window.Rule{quietPrefix: {Hours: france}}, Default: loc}
	cfg.Lanes = slices.Clone(cfg.ClassList())
	for i := range cfg.Lanes {
		if cfg.Lanes[i].Name == admission.Marketing {
			cfg.Lanes[i].Sending.Window = w
			cfg.Lanes[i].Sending.ReleaseSpread = quietSpread
		}
	}
	return cfg, q, nil
}

// frenchMobile is a random French mobile number in a range the
// numbering plan assigns (+33 61...), so that its zone, Europe/Paris, is
// the number's.
func frenchMobile() string { return fmt.Sprintf("+3361%07d", rand.IntN(1e7)) }
