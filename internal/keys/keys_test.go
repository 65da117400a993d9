package keys

import (
	"strings"
	"testing"
)

// TestNames pins every name, and that each of an account's keys carries
// its hash tag (one cluster slot) and the registry's none of an account's.
func TestNames(t *testing.T) {
	a := For("acme")
	for _, tt := range []struct{ got, want string }{
		{a.Tag(), "{sms:acme}"},
		{a.Prefix(), "{sms:acme}:"},
		{a.GlobalTAT(), "{sms:acme}:tat:global"},
		{a.ClassTAT("marketing"), "{sms:acme}:tat:marketing"},
		{a.AfterTAT("otp"), "{sms:acme}:tat:after:otp"},
		{a.SenderTATs(), "{sms:acme}:tat:sender:"},
		{a.PoolIndex("0a1b", "10000"), "{sms:acme}:pool:0a1b:10000"},
		{a.Wake("otp"), "{sms:acme}:wake:otp"},
		{a.Penalty(), "{sms:acme}:penalty"},
		{a.RateOverride(), "{sms:acme}:rate-override"},
		{a.Leases(), "{sms:acme}:leases"},
		{a.Probe(), "{sms:acme}:probe"},
		{a.Learned(), "{sms:acme}:learned"},
		{a.Health(), "{sms:acme}:health"},
		{a.Record("m-1"), "{sms:acme}:id:m-1"},
		{a.Records() + ":m-1", a.Record("m-1")},
		{a.Skip("+62"), "{sms:acme}:skip:+62"},
		{a.Skip(""), "{sms:acme}:skip:"},
		{a.Route("+62"), "{sms:acme}:route:+62"},
		{a.Msg("m-1"), "{sms:acme}:msg:m-1"},
		{a.PID("SM1"), "{sms:acme}:pid:SM1"},
		{a.Resend("m-1"), "{sms:acme}:resend:m-1"},
		{a.Owed(), "{sms:acme}:owed"},
		{a.Delivery("otp", 29_833_333), "{sms:acme}:dlr:otp:29833333"},
		{a.Sent("otp", 1_790_000_000), "{sms:acme}:sent:otp:1790000000"},
		{a.LegacyProcesses(), "{sms:acme}:processes"},
		{a.LegacyProcessStates(), "{sms:acme}:process-states"},
		{Processes(), "{sms:processes}"},
		{ProcessStates(), "{sms:processes}:states"},
		{Suppress().List(), "{sms:suppress}:list"},
		{Suppress().Log(), "{sms:suppress}:log"},
		{Suppress().Seq(), "{sms:suppress}:seq"},
		{Suppress().Inbound("acme", "SM1"), "{sms:suppress}:inbound:acme:SM1"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
		slot := "sms:processes"
		if strings.HasPrefix(tt.want, "{sms:acme}") {
			slot = "sms:acme"
		}
		if strings.HasPrefix(tt.want, "{sms:suppress}") {
			slot = "sms:suppress"
		}
		if hashTag(tt.got) != slot {
			t.Errorf("%q hashes by %q, want %q", tt.got, hashTag(tt.got), slot)
		}
	}
}

// TestRecognised: the names two callers recognise, and near misses.
func TestRecognised(t *testing.T) {
	a := For("acme")
	if RouteSkipped(a.Skip("")) || !RouteSkipped(a.Skip("+62")) {
		t.Errorf("RouteSkipped(%q), RouteSkipped(%q) = %v, %v; want false, true",
			a.Skip(""), a.Skip("+62"), RouteSkipped(a.Skip("")), RouteSkipped(a.Skip("+62")))
	}
	for key, want := range map[string]bool{
		a.GlobalTAT(): true, For("tat:global").GlobalTAT(): true,
		a.ClassTAT("marketing"): false, a.AfterTAT("global"): false, "sms:acme:tat:global": false,
	} {
		if got := IsGlobalTAT(key); got != want {
			t.Errorf("IsGlobalTAT(%q) = %v, want %v", key, got, want)
		}
	}
}

// hashTag is the part of key Redis Cluster hashes: between the first {
// and the next }, if not empty; the whole key otherwise.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}
