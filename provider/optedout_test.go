package provider_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

// TestAnOptedOutAnswerIsReadAsSuch: a number on a simulator's own
// opt-out list is refused as opted out by the generic API (a 400 whose
// code is opted_out) and by Twilio (21610), which the clients read as
// OptedOut; Vonage accepts it (its receipt says err-code 9); a generic
// 400 without the code is a refusal, not an opt-out.
func TestAnOptedOutAnswerIsReadAsSuch(t *testing.T) {
	const to, other = "+447547232824", "+447547230000"
	ctx := context.Background()
	msg := func(id, to string) provider.Message { return provider.Message{ID: id, To: to, Body: "hello"} }

	ge := providertest.NewGeneric(providertest.Config{Token: "t"})
	geSrv := httptest.NewServer(ge)
	t.Cleanup(geSrv.Close)
	ge.OptOut(to)
	ge.RefuseNumber(other)
	gc, err := provider.NewClient(geSrv.URL, "t")
	if err != nil {
		t.Fatal(err)
	}
	_, err = gc.Send(ctx, msg("g1", to))
	if pe, ok := errors.AsType[*provider.Error](err); !ok || !pe.OptedOut() || !pe.Permanent() {
		t.Fatalf("generic, opted out: %v; want an *Error that says OptedOut", err)
	}
	_, err = gc.Send(ctx, msg("g2", other))
	if pe, ok := errors.AsType[*provider.Error](err); !ok || pe.OptedOut() || !pe.Permanent() {
		t.Fatalf("generic, a refused number: %v; want a refusal that is no opt-out", err)
	}

	const sid = "AC0123456789abcdef0123456789abcdef"
	tw := providertest.NewTwilio(providertest.Config{Token: "tok"}, sid)
	twSrv := httptest.NewServer(tw)
	t.Cleanup(twSrv.Close)
	tw.OptOut(to)
	tc, err := provider.NewTwilio(provider.TwilioConfig{AccountSID: sid, AuthToken: provider.StaticSecret("tok"), From: "+15005550006", BaseURL: twSrv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Send(ctx, msg("t1", to)); !optedOut(err) {
		t.Fatalf("twilio, opted out: %v; want OptedOut", err)
	}

	vo := providertest.NewVonage(providertest.Config{Token: "s"}, "k")
	voSrv := httptest.NewServer(vo)
	t.Cleanup(voSrv.Close)
	vo.OptOut(to)
	vc, err := provider.NewVonage(provider.VonageConfig{APIKey: "k", APISecret: provider.StaticSecret("s"), From: "Acme", BaseURL: voSrv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := vc.Send(ctx, msg("v1", to)); err != nil || r.ID == "" {
		t.Fatalf("vonage, opted out: %+v, %v; want accepted (the receipt says err-code 9)", r, err)
	}
	if st := vo.Stats(); st.Accepted != 1 || st.OptedOut != 1 || st.Rejected != 0 {
		t.Fatalf("vonage's stats: %+v; want one accepted, opted out", st)
	}
}

func optedOut(err error) bool {
	pe, ok := errors.AsType[*provider.Error](err)
	return ok && pe.OptedOut()
}
