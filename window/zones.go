package window

import (
	"time"

	"github.com/nyaruka/phonenumbers"
)

// Zones returns the zones libphonenumber's data gives to, an E.164
// number; none when the number is invalid for its country or no zone is
// known (the class's default_zone then judges it: such a number is never
// refused for it).
func Zones(to string) []*time.Location {
	num, err := phonenumbers.Parse(to, "")
	if err != nil || !phonenumbers.IsValidNumber(num) {
		return nil
	}
	names, err := phonenumbers.GetTimezonesForNumber(num)
	if err != nil {
		return nil
	}
	var out []*time.Location
	for _, n := range names {
		if n == phonenumbers.UNKNOWN_TIMEZONE {
			continue
		}
		if loc, err := time.LoadLocation(n); err == nil {
			out = append(out, loc)
		}
	}
	return out
}
