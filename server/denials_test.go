package server

import (
	"fmt"
	"testing"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/nack"
)

// observed counts the events it is told of.
type observed struct{ n int }

func (o *observed) Observe(dispatch.Event) { o.n++ }

// TestDenialsCountTheDeniedByAccountAndClass: the heartbeat's denials are
// the deliveries nacked denied, by the account the event names and its
// class; no other outcome counts; the next observer is told of every
// event; a count read is a copy that later denials leave as it was.
func TestDenialsCountTheDeniedByAccountAndClass(t *testing.T) {
	next := &observed{}
	d := newDenials(next)
	for _, ev := range []dispatch.Event{
		{Account: "a", Class: admission.Marketing, Outcome: nack.Denied},
		{Account: "a", Class: admission.Marketing, Outcome: nack.Denied},
		{Account: "a", Class: admission.OTP, Outcome: nack.Denied},
		{Account: "b", Class: admission.OTP, Outcome: nack.Denied},
		{Account: "a", Class: admission.Marketing, Outcome: nack.Sent},
		{Account: "a", Class: admission.Marketing, Outcome: nack.Throttled},
		{Account: "b", Class: admission.OTP, Outcome: nack.Transient},
	} {
		d.Observe(ev)
	}
	got := d.counts()
	if want := "map[a:map[marketing:2 otp:1] b:map[otp:1]]"; fmt.Sprint(got) != want {
		t.Errorf("denials %v, want %s", got, want)
	}
	if next.n != 7 {
		t.Errorf("the next observer was told of %d events, want 7", next.n)
	}
	d.Observe(dispatch.Event{Account: "a", Class: admission.OTP, Outcome: nack.Denied})
	if got["a"]["otp"] != 1 || d.counts()["a"]["otp"] != 2 {
		t.Errorf("a read count changed with a later denial (%d), or the denial was not counted (%d)", got["a"]["otp"], d.counts()["a"]["otp"])
	}
	newDenials(nil).Observe(dispatch.Event{Outcome: nack.Denied}) // no next observer: nobody told
}
