package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
)

// exampleFile writes the example of the ACCOUNTS_FILE format
// (testdata/accounts-example.yaml, where OTP_TOKEN and BULK_TOKEN stand for
// the paths of the token files, BULK_RECEIPTS for the receipt secret's)
// with its token files, and returns its path and the token files' paths.
func exampleFile(t *testing.T, maxSegmentsLine string) (path, otpToken, bulkToken string) {
	t.Helper()
	example, err := os.ReadFile("testdata/accounts-example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	otpToken = writeFile(t, "otp-token", "otp-auth-token\n")
	bulkToken = writeFile(t, "bulk-token", "bulk-token\n")
	receipts := filepath.Join(filepath.Dir(bulkToken), "bulk-receipts")
	if err := os.WriteFile(receipts, []byte("bulk-receipts\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	content := strings.NewReplacer("OTP_TOKEN", otpToken, "BULK_TOKEN", bulkToken, "BULK_RECEIPTS", receipts, "MAX_SEGMENTS_LINE", maxSegmentsLine).Replace(string(example))
	return writeFile(t, "accounts.yaml", content), otpToken, bulkToken
}

// TestLoadAccountsExample decodes the example over an environment that
// also sets single-account variables: the accounts take none of them, and
// every global setting.
func TestLoadAccountsExample(t *testing.T) {
	base, err := loadConfig(map[string]string{
		"SMS_PROVIDER": "vonage", "SMS_PROVIDER_URL": "https://env.example", "TWILIO_FROM": "+19990000000",
		"TARGET_RPS": "50", "MARKETING_RPS": "40", "BURST": "2", "MAX_SEGMENTS": "3", "PROVIDER_MAX_INFLIGHT": "7",
		"SMS_ACCOUNT": "env", "SEND_TIMEOUT": "3s", "MAX_SENDERS": "4",
	})
	if err != nil {
		t.Fatal(err)
	}
	// The example's otp account counts segments with the default
	// max_segments, 6: 90 × 1.02 + 5 + 6 - 1 = 101.8 > 100. It needs 4.
	path, otpToken, bulkToken := exampleFile(t, "max_segments: 4")

	got, err := accountsOf(base.Process, path)
	if err != nil {
		t.Fatal(err)
	}

	otp := base.Account
	otp.Name, otp.Provider = "otp", "twilio"
	otp.ProviderURL, otp.ProviderToken, otp.ProviderTokenFile = "", "", ""
	otp.TwilioAccountSID, otp.TwilioAuthToken, otp.TwilioAuthTokenFile = "AC0123456789abcdef0123456789abcdef", "", otpToken
	otp.TwilioFrom, otp.TwilioServiceSID, otp.TwilioAPIURL = "", "MG0123456789abcdef0123456789abcdef", "https://api.twilio.com"
	otp.VonageAPIKey, otp.VonageAPISecret, otp.VonageAPISecretFile, otp.VonageFrom, otp.VonageAPIURL = "", "", "", "", "https://rest.nexmo.com"
	otp.ContractRPS, otp.TargetRPS, otp.MarketingRPS, otp.Burst = 100, 90, 70, 5
	otp.RateUnit, otp.MaxSegments, otp.MaxInFlight = "segment", 4, 0

	bulk := otp
	bulk.Name, bulk.Provider = "bulk", "generic"
	bulk.ProviderURL, bulk.ProviderToken, bulk.ProviderTokenFile = "https://sms.example.com", "bulk-token", bulkToken
	bulk.TwilioAccountSID, bulk.TwilioAuthTokenFile, bulk.TwilioServiceSID = "", "", ""
	bulk.RateUnit, bulk.MaxSegments = "message", 6
	bulk.ReceiptSecretFile = filepath.Join(filepath.Dir(bulkToken), "bulk-receipts")

	otp.Classes = []admission.Class{admission.OTP}
	bulk.Classes = []admission.Class{admission.OTP, admission.Marketing} // priority order, whatever the file's
	bulk.ClassRPS = map[admission.Class]float64{admission.Marketing: 70}
	bulk.Senders = []admission.Sender{{From: "+15550000001", RPS: 1}, {From: "+15550000002", RPS: 1}}
	bulk.Adaptive = admission.Adaptive{Enabled: true, MinRPS: 10, ProbeInterval: 10 * time.Minute, Step: 10 * time.Second}
	want := []Account{otp, bulk}
	secrets := []map[string]string{{"TWILIO_AUTH_TOKEN_FILE": "otp-auth-token"}, {"SMS_PROVIDER_TOKEN_FILE": "bulk-token", "SMS_RECEIPT_SECRET_FILE": "bulk-receipts"}}
	if len(got) != len(want) {
		t.Fatalf("%d accounts, want %d", len(got), len(want))
	}
	for i := range want {
		g := got[i]
		read := map[string]string{}
		for env, s := range g.secrets {
			read[env] = s.Value()
		}
		if !reflect.DeepEqual(read, secrets[i]) {
			t.Errorf("account %d: files read %v, want %v", i, read, secrets[i])
		}
		g.secrets, want[i].secrets = nil, nil
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("account %d:\n got %+v\nwant %+v", i, g, want[i])
		}
	}
	if l := base.Limiter(got[1]); l.LeaseTTL != 13*time.Second || l.MaxSenders != 4 {
		t.Errorf("global settings not carried: lease TTL %v, MaxSenders %d", l.LeaseTTL, l.MaxSenders)
	}
	if r := routes(got); !reflect.DeepEqual(r, map[admission.Class][]int{admission.OTP: {0, 1}, admission.Marketing: {1}}) {
		t.Errorf("routes %v", r)
	}
	for i, s := range got {
		if _, _, err := s.Sender(base.SendTimeout); err != nil {
			t.Errorf("account %d: Sender: %v", i, err)
		}
	}
}

// TestLoadAccountsExampleAsWritten: without max_segments, the example's
// otp account, counting segments at 90 of 100, takes the 4 segments its
// rates leave room for; given 6, it could break its contract within a
// second, and the file is refused.
func TestLoadAccountsExampleAsWritten(t *testing.T) {
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	path, _, _ := exampleFile(t, "")
	setups, err := accountsOf(base.Process, path)
	if err != nil {
		t.Fatal(err)
	}
	if c := setups[0]; c.RateUnit != "segment" || c.MaxSegments != 4 {
		t.Fatalf("otp: rates in %ss, max_segments %d; want segments, 4", c.RateUnit, c.MaxSegments)
	}
	path, _, _ = exampleFile(t, "max_segments: 6")
	_, err = accountsOf(base.Process, path)
	want := `invalid configuration: ACCOUNTS_FILE (--accounts-file): ` + path + `: account "otp": max_segments: target_rps (90) × (1s + PROVIDER_ARRIVAL_JITTER (20ms)) + burst (5) + max_segments (6) - 1 = 101.8 segments could reach the provider within one second, above contract_rps (100): lower target_rps, burst, max_segments or PROVIDER_ARRIVAL_JITTER`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n %v\nwant\n %s", err, want)
	}
}

// TestAccountsFileRefusesTheSingleAccountSettings: with ACCOUNTS_FILE, a
// single-account variable given as well stops the process, naming it.
func TestAccountsFileRefusesTheSingleAccountSettings(t *testing.T) {
	path, _, _ := exampleFile(t, "max_segments: 4")
	_, err := loadConfig(map[string]string{"ACCOUNTS_FILE": path, "TARGET_RPS": "50"})
	if err == nil || !strings.Contains(err.Error(), "TARGET_RPS") || !strings.Contains(err.Error(), "not used with ACCOUNTS_FILE") {
		t.Fatalf("TARGET_RPS with ACCOUNTS_FILE: %v", err)
	}
	if _, err := loadConfig(map[string]string{"ACCOUNTS_FILE": path, "OTP_MAX_WAIT": "2s"}); err != nil {
		t.Fatalf("a global setting with ACCOUNTS_FILE: %v", err)
	}
}

// TestTheOperatingGuidesAccountsExampleLoads: the complete ACCOUNTS_FILE
// example of docs/configuring.md is a file the dispatcher accepts, and means
// what the guide says of it.
func TestTheOperatingGuidesAccountsExampleLoads(t *testing.T) {
	b, err := os.ReadFile("../docs/configuring.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, after, ok := strings.Cut(doc, "## Accounts\n")
	if !ok {
		t.Fatal("docs/configuring.md has no Accounts section")
	}
	_, block, ok := strings.Cut(after, "```yaml\n")
	if !ok {
		t.Fatal("the Accounts section has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	block = strings.NewReplacer(
		"/var/run/secrets/otp/token", writeFile(t, "otp-token", "otp-auth-token\n"),
		"/var/run/secrets/bulk/token", writeFile(t, "bulk-token", "bulk-token\n"),
	).Replace(block)
	base, err := loadConfig(map[string]string{"ACCOUNTS_FILE": writeFile(t, "accounts.yaml", block)})
	if err != nil {
		t.Fatal(err)
	}
	setups, err := base.Accounts()
	if err != nil {
		t.Fatalf("the guide's example: %v", err)
	}
	if len(setups) != 2 || setups[0].Name != "otp" || setups[1].Name != "bulk" {
		t.Fatalf("accounts %+v, want otp then bulk", setups)
	}
	r := routes(setups)
	if len(r[admission.OTP]) != 2 || r[admission.OTP][0] != 0 || len(r[admission.Marketing]) != 1 || r[admission.Marketing][0] != 1 {
		t.Fatalf("routes %v: want OTP on otp then bulk, marketing on bulk", r)
	}
	bulk := setups[1]
	if len(bulk.Senders) != 3 || !bulk.Adaptive.Enabled || bulk.Adaptive.MinRPS != 10 || bulk.MarketingRPS != 70 {
		t.Fatalf("bulk: %+v", bulk)
	}
}

// TestTheOperatingGuidesDestinationsExampleLoads: the example of
// docs/configuring.md's "Failover and destinations", "Destinations", loads, and routes as the
// guide says: +81 to jp then world, every other number to world.
func TestTheOperatingGuidesDestinationsExampleLoads(t *testing.T) {
	b, err := os.ReadFile("../docs/configuring.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "## Failover and destinations\n")
	if ok {
		_, after, ok = strings.Cut(after, "### Destinations\n")
	}
	if !ok {
		t.Fatal("docs/configuring.md has no section Failover and destinations, Destinations")
	}
	_, block, ok := strings.Cut(after, "```yaml\n")
	if !ok {
		t.Fatal("the section has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	block = strings.NewReplacer(
		"/var/run/secrets/world/token", writeFile(t, "world-token", "world-token\n"),
		"/var/run/secrets/jp/secret", writeFile(t, "jp-secret", "jp-secret\n"),
	).Replace(block)
	base, err := loadConfig(map[string]string{"ACCOUNTS_FILE": writeFile(t, "accounts.yaml", block)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := base.Routing()
	if err != nil {
		t.Fatalf("the guide's example: %v", err)
	}
	tab := r.Table()
	for _, c := range []admission.Class{admission.OTP, admission.Marketing} {
		if got := tab.Route(c, "+819012345678"); !reflect.DeepEqual(got, []int{1, 0}) {
			t.Errorf("%v to +81: %v, want jp then world", c, got)
		}
		if got := tab.Route(c, "+14155550100"); !reflect.DeepEqual(got, []int{0}) {
			t.Errorf("%v to +1: %v, want world", c, got)
		}
	}
	r.Route = dispatch.RouteFirst
	if got := r.Table().Route(admission.OTP, "+819012345678"); !reflect.DeepEqual(got, []int{0, 1}) {
		t.Errorf("route first, otp to +81: %v, want world then jp", got)
	}
}

// The accounts the error cases build on.
const (
	okOTP = `  - name: otp
    provider: generic
    generic: {url: https://a.example, token: t1}
    classes: [otp]
`
	okBulk = `  - name: bulk
    provider: generic
    generic: {url: https://b.example, token: t2}
    classes: [marketing]
`
	twilioHead = `  - name: tw
    provider: twilio
    classes: [marketing]
`
)

func TestLoadAccountsErrors(t *testing.T) {
	const secret = "s3cret"
	missing := filepath.Join(t.TempDir(), "missing-token")
	tests := []struct {
		name    string
		content string
		want    []string // in the error, in this order
	}{
		{"unknown key at top level", "accounts:\n" + okOTP + okBulk + "foo: 1\n",
			[]string{": line 10: foo: unknown key (the file takes accounts, route, classes)"}},
		{"unknown route", "accounts:\n" + okOTP + okBulk + "route: longest\n",
			[]string{`: line 10: route: want first or longest_prefix, got "longest"`}},
		{"destination without +", "accounts:\n" + okOTP + okBulk + "    destinations: [\"+1\", \"81\"]\n",
			[]string{`: account "bulk": destinations[1]: want + and 1 to 6 digits, such as "+81", got "81"`}},
		{"destination of 7 digits", "accounts:\n" + okOTP + okBulk + "    destinations: [\"+8190123\"]\n",
			[]string{`: account "bulk": destinations[0]: want + and 1 to 6 digits`}},
		{"destination not digits", "accounts:\n" + okOTP + okBulk + "    destinations: [\"+8-1\"]\n",
			[]string{`: account "bulk": destinations[0]: want + and 1 to 6 digits`}},
		{"destination given twice", "accounts:\n" + okOTP + okBulk + "    destinations: [\"+81\", \"+1\", \"+81\"]\n",
			[]string{`: account "bulk": destinations[2]: "+81" is also destinations[0]`}},
		{"destinations empty", "accounts:\n" + okOTP + okBulk + "    destinations: []\n",
			[]string{`: account "bulk": destinations: an empty list would send nothing`}},
		{"destinations without a value", "accounts:\n" + okOTP + okBulk + "    destinations:\n",
			[]string{`: account "bulk": destinations: an empty list would send nothing`}},
		{"destinations not a list", "accounts:\n" + okOTP + okBulk + "    destinations: \"+81\"\n",
			[]string{`: line 10: account "bulk": destinations: want a list, got a single value`}},
		{"failover of otp", "accounts:\n" + okOTP + "    failover_classes: [otp]\n" + okBulk,
			[]string{`: account "otp": failover_classes[0]: otp always fails over: remove it`}},
		{"failover of an unknown class", "accounts:\n" + okOTP + okBulk + "    failover_classes: [sms]\n",
			[]string{`: account "bulk": failover_classes[0]: want marketing, got "sms"`}},
		{"failover of a class not served", "accounts:\n" + okOTP + "    failover_classes: [marketing]\n" + okBulk,
			[]string{`: account "otp": failover_classes[0]: the account does not serve marketing (see its classes)`}},
		{"keyword list empty", "accounts:\n" + okOTP + okBulk + "    opt_out_keywords: []\n",
			[]string{`: account "bulk": opt_out_keywords: empty: leave the key out for the defaults`}},
		{"keyword of punctuation", "accounts:\n" + okOTP + okBulk + "    help_keywords: [AIDE, \"?!\"]\n",
			[]string{`: account "bulk": help_keywords: "?!" is no word: a keyword has a letter or a digit`}},
		{"keyword in two lists", "accounts:\n" + okOTP + okBulk + "    opt_out_keywords: [ARRET]\n    opt_in_keywords: [arret]\n",
			[]string{`: account "bulk": opt_in_keywords: ARRET is in opt_out_keywords too: a reply must say one thing`}},
		{"failover class listed twice", "accounts:\n" + okOTP + okBulk + "    failover_classes: [marketing, marketing]\n",
			[]string{`: account "bulk": failover_classes[1]: marketing is listed twice`}},
		{"unknown key in an account", "accounts:\n" + okOTP + okBulk + "    rps: 5\n",
			[]string{`: line 10: account "bulk": rps: unknown key (an account takes name, provider, generic, twilio, vonage, contract_rps,`}},
		{"unknown key in the twilio block", "accounts:\n" + okOTP + twilioHead + "    twilio: {account_sid: AC1, auth_token: x, from: \"+1\", sid: MG1}\n",
			[]string{`: line 9: account "tw": twilio.sid: unknown key (twilio takes account_sid, auth_token, auth_token_file, from, messaging_service_sid, api_url)`}},
		{"unknown key in a sender", "accounts:\n" + okOTP + okBulk + "    senders: [{from: a, rps: 1, number: 2}]\n",
			[]string{`account "bulk": senders[0].number: unknown key (senders[0] takes from, rps)`}},
		{"duplicate name", "accounts:\n" + okOTP + strings.Replace(okBulk, "bulk", "otp", 1),
			[]string{`: account "otp": name: "otp" is also the name of the account at line 2: both would use the Redis keys {sms:otp}:*`}},
		{"one Twilio account twice", "accounts:\n" + okOTP + twilioHead + "    twilio: {account_sid: AC1, auth_token: " + secret + ", from: \"+1\"}\n" +
			strings.Replace(twilioHead, "name: tw", "name: tw2", 1) + "    twilio: {account_sid: ac1, auth_token: " + secret + ", messaging_service_sid: MG1}\n",
			[]string{`: account "tw2": twilio.account_sid: the same twilio account as account "tw" (line 6): each entry has a limiter of its own, and together they could send twice the contract`}},
		{"one Vonage account twice", "accounts:\n" + okOTP +
			"  - name: vo\n    provider: vonage\n    vonage: {api_key: k, api_secret: " + secret + ", from: A}\n    classes: [marketing]\n" +
			"  - name: vo2\n    provider: vonage\n    vonage: {api_key: k, api_secret: " + secret + ", from: B}\n    classes: [otp]\n",
			[]string{`: account "vo2": vonage.api_key: the same vonage account as account "vo" (line 6)`}},
		{"one generic account twice, its token once in a file", "accounts:\n" + okOTP +
			"  - name: bulk\n    provider: generic\n    generic: {url: \"https://A.example/\", token_file: " + writeFile(t, "t1", "t1\n") + "}\n    classes: [marketing]\n",
			[]string{`: account "bulk": generic.url: the same generic account as account "otp" (line 2)`}},
		{"one generic account twice, its port", "accounts:\n" + okOTP + strings.Replace(okBulk, "https://b.example, token: t2", "\"https://a.example:443\", token: t1", 1),
			[]string{`: account "bulk": generic.url: the same generic account as account "otp" (line 2): each entry has a limiter of its own, and together they could send twice the contract`}},
		{"one generic account twice, a trailing dot", "accounts:\n" + okOTP + strings.Replace(okBulk, "https://b.example, token: t2", "\"https://a.example.\", token: t1", 1),
			[]string{`: account "bulk": generic.url: the same generic account as account "otp" (line 2): each entry has a limiter of its own, and together they could send twice the contract`}},
		{"one generic account twice, a trailing slash", "accounts:\n" + okOTP + strings.Replace(okBulk, "https://b.example, token: t2", "\"https://a.example/\", token: t1", 1),
			[]string{`: account "bulk": generic.url: the same generic account as account "otp" (line 2): each entry has a limiter of its own, and together they could send twice the contract`}},
		{"one generic account twice, its host in capitals", "accounts:\n" + okOTP + strings.Replace(okBulk, "https://b.example, token: t2", "\"https://A.EXAMPLE\", token: t1", 1),
			[]string{`: account "bulk": generic.url: the same generic account as account "otp" (line 2): each entry has a limiter of its own, and together they could send twice the contract`}},
		{"one generic account twice, every spelling at once", "accounts:\n" + okOTP + strings.Replace(okBulk, "https://b.example, token: t2", "\"HTTPS://A.Example.:443//\", token: t1", 1),
			[]string{`: account "bulk": generic.url: the same generic account as account "otp" (line 2): each entry has a limiter of its own, and together they could send twice the contract`}},
		{"class nobody serves", "accounts:\n" + okOTP,
			[]string{": classes: no account serves marketing"}},
		{"target above contract", "accounts:\n" + okOTP + okBulk + "    target_rps: 120\n",
			[]string{`: account "bulk": target_rps: 120 is above contract_rps (100): the dispatcher would break the contract`}},
		{"reach check with segments", "accounts:\n" + okOTP + okBulk + "    rate_unit: segment\n    max_segments: 6\n",
			[]string{`: account "bulk": max_segments: target_rps (90) × (1s + PROVIDER_ARRIVAL_JITTER (20ms)) + burst (5) + max_segments (6) - 1 = 101.8 segments`, "above contract_rps (100)"}},
		{"reach check with messages", "accounts:\n" + okOTP + okBulk + "    burst: 9\n",
			[]string{`: account "bulk": target_rps: target_rps (90) × (1s + PROVIDER_ARRIVAL_JITTER (20ms)) + burst (9) = 100.8 messages`}},
		{"marketing cap above target", "accounts:\n" + okOTP + okBulk + "    target_rps: 50\n    class_rps: {marketing: 60}\n",
			[]string{`: account "bulk": class_rps.marketing: 60 is above target_rps (50): OTP would have no room`}},
		{"class_rps for a class not served", "accounts:\n" + okOTP + "    class_rps: {marketing: 50}\n" + okBulk,
			[]string{`: account "otp": class_rps.marketing: the account does not serve marketing`}},
		{"class_rps.otp", "accounts:\n" + okOTP + okBulk + "    class_rps: {otp: 50}\n",
			[]string{`: account "bulk": class_rps.otp: OTP is capped only by target_rps`}},
		{"class_rps unknown class", "accounts:\n" + okOTP + okBulk + "    class_rps: {sms: 50}\n",
			[]string{`: line 10: account "bulk": class_rps.sms: unknown key (class_rps takes otp, marketing)`}},
		{"sender with rps 0", "accounts:\n" + okOTP + okBulk + "    senders: [{from: \"+15550000001\", rps: 0}]\n",
			[]string{`: account "bulk": senders[0].rps: must be a finite number of at least 0.01, got 0`}},
		{"sender without rps", "accounts:\n" + okOTP + okBulk + "    senders: [{from: \"+15550000001\"}]\n",
			[]string{`: account "bulk": senders[0].rps: required`}},
		{"duplicate sender from", "accounts:\n" + okOTP + okBulk + "    senders:\n      - {from: \"+15550000001\", rps: 1}\n      - {from: \"+15550000001\", rps: 2}\n",
			[]string{`: account "bulk": senders[1].from: "+15550000001" is also senders[0].from`}},
		{"sender without from", "accounts:\n" + okOTP + okBulk + "    senders: [{rps: 1}]\n",
			[]string{`: account "bulk": senders[0].from: required`}},
		{"a pool above its largest", "accounts:\n" + okOTP + okBulk + "    senders:\n" + strings.Repeat("      - {from: x, rps: 1}\n", admission.MaxPoolSize+1),
			[]string{`: account "bulk": senders: 10001 senders: a pool holds at most 10000`}},
		{"a pool of too many rates", "accounts:\n" + okOTP + okBulk + "    senders:\n" + poolOfRates(admission.MaxPoolRates+1),
			[]string{`: account "bulk": senders[8].rps: 9 makes 9 different rates: a pool has at most 8`}},
		{"adaptive min_rps above target", "accounts:\n" + okOTP + okBulk + "    adaptive: {enabled: true, min_rps: 95}\n",
			[]string{`: account "bulk": adaptive.min_rps: 95 is above target_rps (90)`}},
		{"adaptive probe_interval too short", "accounts:\n" + okOTP + okBulk + "    adaptive: {enabled: true, probe_interval: 500ms}\n",
			[]string{`: account "bulk": adaptive.probe_interval: must be at least 1s, got 500ms`}},
		{"adaptive step not a duration", "accounts:\n" + okOTP + okBulk + "    adaptive: {enabled: true, step: 10}\n",
			[]string{`: account "bulk": adaptive.step: want a duration such as 10s, got "10"`}},
		{"adaptive enabled not a boolean", "accounts:\n" + okOTP + okBulk + "    adaptive: {enabled: maybe}\n",
			[]string{`: line 10: account "bulk": adaptive.enabled: want true or false, got "maybe"`}},
		{"block of the wrong provider", "accounts:\n" + okOTP + twilioHead + "    generic: {url: https://b.example, token: t2}\n",
			[]string{`: account "tw": generic: given with provider twilio: only the twilio block may be given`}},
		{"a second block", "accounts:\n" + okOTP + twilioHead + "    twilio: {account_sid: AC1, auth_token: x, from: \"+1\"}\n    vonage: {api_key: k}\n",
			[]string{`: account "tw": vonage: given with provider twilio: only the twilio block may be given`}},
		{"no block for the provider", "accounts:\n" + okOTP + twilioHead,
			[]string{`: account "tw": twilio: required with provider twilio`}},
		{"both auth_token and auth_token_file", "accounts:\n" + okOTP + twilioHead + "    twilio: {account_sid: AC1, auth_token: " + secret + ", auth_token_file: " + missing + ", from: \"+1\"}\n",
			[]string{`: account "tw": twilio.auth_token_file: set either it or twilio.auth_token, not both`}},
		{"twilio without account_sid", "accounts:\n" + okOTP + twilioHead + "    twilio: {auth_token: " + secret + ", from: \"+1\"}\n",
			[]string{`: account "tw": twilio.account_sid: required with provider=twilio`}},
		{"twilio without a sender", "accounts:\n" + okOTP + twilioHead + "    twilio: {account_sid: AC1, auth_token: " + secret + "}\n",
			[]string{`: account "tw": twilio.from: set it or twilio.messaging_service_sid with provider=twilio`}},
		{"twilio account_sid the adapter refuses", "accounts:\n" + okOTP + twilioHead + "    twilio: {account_sid: AC-1, auth_token: " + secret + ", from: \"+1\"}\n",
			[]string{`: account "tw": twilio.account_sid: provider: TwilioConfig.AccountSID: byte 2 is not an ASCII letter or digit`}},
		{"a token a header cannot carry", "accounts:\n" + okOTP + twilioHead + "    twilio: {account_sid: AC1, auth_token: \"" + secret + " x\", from: \"+1\"}\n",
			[]string{`: account "tw": twilio.auth_token: `, "byte 6 is a space"}},
		{"vonage without from", "accounts:\n" + okOTP + "  - name: vo\n    provider: vonage\n    vonage: {api_key: k, api_secret: " + secret + "}\n    classes: [marketing]\n",
			[]string{`: account "vo": vonage.from: required with provider=vonage`}},
		{"token file missing", "accounts:\n" + okOTP + "  - name: bulk\n    provider: generic\n    generic: {url: https://b.example, token_file: " + missing + "}\n    classes: [marketing]\n",
			[]string{`: account "bulk": generic.token_file: `, missing}},
		{"generic url not a URL", "accounts:\n" + okOTP + "  - name: bulk\n    provider: generic\n    generic: {url: b.example, token: t}\n    classes: [marketing]\n",
			[]string{`: account "bulk": generic.url: want an absolute http or https URL`}},
		{"generic without url", "accounts:\n" + okOTP + "  - name: bulk\n    provider: generic\n    generic: {token: t}\n    classes: [marketing]\n",
			[]string{`: account "bulk": generic.url: required to serve`}},
		{"unknown provider", "accounts:\n" + okOTP + "  - name: x\n    provider: sinch\n    classes: [marketing]\n",
			[]string{`: account "x": provider: want generic, twilio or vonage, got "sinch"`}},
		{"no provider", "accounts:\n" + okOTP + "  - name: x\n    classes: [marketing]\n",
			[]string{`: account "x": provider: required`}},
		{"no name", "accounts:\n" + okOTP + "  - provider: generic\n    classes: [marketing]\n",
			[]string{`: account 2 (no name): name: required`}},
		{"name unfit for a hash tag", "accounts:\n" + okOTP + strings.Replace(okBulk, "bulk", "\"a{b\"", 1),
			[]string{`: account "a{b": name: must be non-empty printable ASCII without spaces, braces or / \ % ? # (a Redis hash tag, a segment of the receipts path), and not . or .., got "a{b"`}},
		{"name ., unfit for the receipts path", "accounts:\n" + okOTP + strings.Replace(okBulk, "bulk", "\".\"", 1),
			[]string{`: account ".": name: must be non-empty printable ASCII without spaces, braces or / \ % ? #`, `got "."`}},
		{"name .., unfit for the receipts path", "accounts:\n" + okOTP + strings.Replace(okBulk, "bulk", "\"..\"", 1),
			[]string{`: account "..": name: must be non-empty printable ASCII without spaces, braces or / \ % ? #`, `got ".."`}},
		{"name a/b, unfit for the receipts path", "accounts:\n" + okOTP + strings.Replace(okBulk, "bulk", "\"a/b\"", 1),
			[]string{`: account "a/b": name: must be non-empty printable ASCII without spaces, braces or / \ % ? #`, `got "a/b"`}},
		{"name a%b, unfit for the receipts path", "accounts:\n" + okOTP + strings.Replace(okBulk, "bulk", "\"a%b\"", 1),
			[]string{`: account "a%b": name: must be non-empty printable ASCII without spaces, braces or / \ % ? #`, `got "a%b"`}},
		{"name a?b, unfit for the receipts path", "accounts:\n" + okOTP + strings.Replace(okBulk, "bulk", "\"a?b\"", 1),
			[]string{`: account "a?b": name: must be non-empty printable ASCII without spaces, braces or / \ % ? #`, `got "a?b"`}},
		{"name a#b, unfit for the receipts path", "accounts:\n" + okOTP + strings.Replace(okBulk, "bulk", "\"a#b\"", 1),
			[]string{`: account "a#b": name: must be non-empty printable ASCII without spaces, braces or / \ % ? #`, `got "a#b"`}},
		{"name a\\b, unfit for the receipts path", "accounts:\n" + okOTP + strings.Replace(okBulk, "bulk", "'a\\b'", 1),
			[]string{`: account "a\\b": name: must be non-empty printable ASCII without spaces, braces or / \ % ? #`, `got "a\\b"`}},
		{"no classes", "accounts:\n" + okOTP + "  - name: x\n    provider: generic\n    generic: {url: https://b.example}\n",
			[]string{`: account "x": classes: required`}},
		{"unknown class", "accounts:\n" + okOTP + strings.Replace(okBulk, "[marketing]", "[marketing, sms]", 1),
			[]string{`: account "bulk": classes[1]: want otp or marketing, got "sms"`}},
		{"class listed twice", "accounts:\n" + okOTP + strings.Replace(okBulk, "[marketing]", "[marketing, marketing]", 1),
			[]string{`: account "bulk": classes[1]: marketing is listed twice`}},
		{"negative max_inflight", "accounts:\n" + okOTP + okBulk + "    max_inflight: -1\n",
			[]string{`: account "bulk": max_inflight: must not be negative, got -1`}},
		{"max_segments out of range", "accounts:\n" + okOTP + okBulk + "    max_segments: 0\n",
			[]string{`: account "bulk": max_segments: must be 1-100, got 0`}},
		{"burst zero", "accounts:\n" + okOTP + okBulk + "    burst: 0\n",
			[]string{`: account "bulk": burst: must be at least 1, got 0`}},
		{"rate not finite", "accounts:\n" + okOTP + okBulk + "    contract_rps: .inf\n",
			[]string{`: account "bulk": contract_rps: must be a finite number, got +Inf`}},
		{"rate not a number", "accounts:\n" + okOTP + okBulk + "    contract_rps: 100rps\n",
			[]string{`: line 10: account "bulk": contract_rps: want a number, got "100rps"`}},
		{"classes not a list", "accounts:\n" + okOTP + "  - name: bulk\n    classes: marketing\n",
			[]string{`: line 7: account "bulk": classes: want a list, got a single value`}},
		{"a block that is not a mapping", "accounts:\n" + okOTP + "  - name: bulk\n    generic: " + secret + "\n",
			[]string{`: line 7: account "bulk": generic: want a mapping, got a single value`}},
		{"key given twice", "accounts:\n" + okOTP + okBulk + "    burst: 4\n    burst: 3\n",
			[]string{`: line 11: account "bulk": burst: given twice (first at line 10)`}},
		{"YAML syntax", "accounts:\n  - name: otp\n\tprovider: generic\n",
			[]string{": line 2: found a tab character that violates indentation"}},
		{"no accounts", "accounts: []\n", []string{": line 1: accounts: required: at least one account"}},
		{"empty file", "", []string{": accounts: required: at least one account"}},
		{"not a mapping", "- name: otp\n", []string{": line 1: want a mapping, got a list"}},
		{"a second document", "accounts:\n" + okOTP + okBulk + "---\naccounts: []\n",
			[]string{": line 10: a second YAML document: the file holds one"}},
	}
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "accounts.yaml", tt.content)
			setups, err := accountsOf(base.Process, path)
			var ce *Error
			if !errors.As(err, &ce) || ce.Env != "ACCOUNTS_FILE" {
				t.Fatalf("loadAccounts = %d accounts, %v; want a configuration error for ACCOUNTS_FILE", len(setups), err)
			}
			msg := err.Error()
			t.Log(msg)
			prefix := "invalid configuration: ACCOUNTS_FILE (--accounts-file): " + path + ": "
			if !strings.HasPrefix(msg, prefix) {
				t.Errorf("error %q: want it to start with %q", msg, prefix)
			}
			if strings.ContainsAny(msg, "\n\r") || strings.Contains(msg, secret) {
				t.Errorf("error %q: want one line without the secret", msg)
			}
			rest := msg
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error\n %s\nwant in it, in order\n %s", msg, strings.Join(tt.want, "\n "))
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// TestLoadAccountsUnreadable: a file that cannot be read is a
// configuration error naming it.
func TestLoadAccountsUnreadable(t *testing.T) {
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{
		"missing":         filepath.Join(t.TempDir(), "accounts.yaml"),
		"a directory":     t.TempDir(),
		"larger than 1MB": writeFile(t, "accounts.yaml", "accounts: []\n"+strings.Repeat("#", maxFileSize)),
	} {
		_, err := accountsOf(base.Process, path)
		var ce *Error
		if !errors.As(err, &ce) || ce.Env != "ACCOUNTS_FILE" || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want a configuration error for ACCOUNTS_FILE naming %s", name, err, path)
		}
	}
}

// TestLoadAccountsDefaults: an account that gives only what is required
// takes the single-account variables' defaults, marketing's cap within its
// target, no sender pool and no adaptive limit.
func TestLoadAccountsDefaults(t *testing.T) {
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "accounts.yaml", "accounts:\n"+okOTP+okBulk+"    target_rps: 50\n    adaptive: {min_rps: 2}\n")
	got, err := accountsOf(base.Process, path)
	if err != nil {
		t.Fatal(err)
	}
	otp, bulk := got[0], got[1]
	if c := otp; c.ContractRPS != 100 || c.TargetRPS != 90 || c.MarketingRPS != 70 || c.Burst != 5 ||
		c.RateUnit != "message" || c.MaxSegments != 6 || c.MaxInFlight != 0 || c.ProviderToken != "t1" {
		t.Errorf("otp: %+v, want the defaults", c)
	}
	if otp.Senders != nil || otp.Adaptive != (admission.Adaptive{}) {
		t.Errorf("otp: senders %v, adaptive %+v; want none", otp.Senders, otp.Adaptive)
	}
	if bulk.MarketingRPS != 50 {
		t.Errorf("bulk: marketing cap %v, want its target_rps 50", bulk.MarketingRPS)
	}
	want := admission.Adaptive{MinRPS: 2, ProbeInterval: admission.DefaultProbeInterval, Step: admission.DefaultAdaptiveStep}
	if bulk.Adaptive != want {
		t.Errorf("bulk: adaptive %+v, want %+v", bulk.Adaptive, want)
	}

	path = writeFile(t, "accounts.yaml", "accounts:\n"+okOTP+okBulk+"    adaptive: {enabled: true}\n")
	if got, err = accountsOf(base.Process, path); err != nil {
		t.Fatal(err)
	}
	if a := got[1].Adaptive; a.MinRPS != 9 || !a.Enabled {
		t.Errorf("adaptive %+v, want enabled with min_rps target_rps/10 = 9", a)
	}
}

// TestSingleAccountDefaults: the single-account variables at their
// defaults are one account, "default", serving both classes.
func TestSingleAccountDefaults(t *testing.T) {
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	accounts, err := base.Accounts()
	if err != nil || len(accounts) != 1 {
		t.Fatalf("%d accounts, %v; want one", len(accounts), err)
	}
	s := accounts[0]
	if !reflect.DeepEqual(s, base.Account) {
		t.Errorf("cfg %+v, want the configuration as given", s)
	}
	if s.Name != "default" || s.MarketingRPS != 70 || s.TargetRPS != 90 {
		t.Errorf("account %q, target %v, marketing %v; want default, 90, 70", s.Name, s.TargetRPS, s.MarketingRPS)
	}
	if !reflect.DeepEqual(s.Classes, []admission.Class{admission.OTP, admission.Marketing}) {
		t.Errorf("classes %v, want otp, marketing", s.Classes)
	}
	if s.Senders != nil || s.Adaptive != (admission.Adaptive{}) {
		t.Errorf("senders %v, adaptive %+v; want none, off", s.Senders, s.Adaptive)
	}
	if r := routes([]Account{s}); !reflect.DeepEqual(r, map[admission.Class][]int{admission.OTP: {0}, admission.Marketing: {0}}) {
		t.Errorf("routes %v, want the account for both classes", r)
	}
}

// TestLoadAccountsDestinations: destinations and failover classes are
// read as given, left out they are nil (every destination, no failover
// class), and route takes the table's mode. A class may have no account
// for some destinations.
func TestLoadAccountsDestinations(t *testing.T) {
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "accounts.yaml", "route: longest_prefix\naccounts:\n"+
		okOTP+"    destinations: [\"+81\", \" +1\"]\n"+
		okBulk+"    destinations: [\"+1415\"]\n    failover_classes: [marketing]\n")
	r, err := loadAccounts(base.Process, path)
	if err != nil {
		t.Fatal(err)
	}
	otp, bulk := r.Accounts[0], r.Accounts[1]
	if r.Route != dispatch.RouteLongestPrefix || !reflect.DeepEqual(otp.Destinations, []string{"+81", "+1"}) || otp.FailoverClasses != nil ||
		!reflect.DeepEqual(bulk.Destinations, []string{"+1415"}) || !reflect.DeepEqual(bulk.FailoverClasses, []admission.Class{admission.Marketing}) {
		t.Errorf("route %v, otp %v %v, bulk %v %v", r.Route, otp.Destinations, otp.FailoverClasses, bulk.Destinations, bulk.FailoverClasses)
	}
	tab := r.Table()
	if got := tab.Route(admission.Marketing, "+819012345678"); len(got) != 0 {
		t.Errorf("marketing to +81: %v, want no route", got)
	}
	if got := tab.Route(admission.Marketing, "+14155550100"); !reflect.DeepEqual(got, []int{1}) {
		t.Errorf("marketing to +1415: %v, want bulk", got)
	}

	path = writeFile(t, "accounts.yaml", "accounts:\n"+okOTP+okBulk)
	if r, err = loadAccounts(base.Process, path); err != nil {
		t.Fatal(err)
	}
	if r.Route != dispatch.RouteFirst || r.Accounts[0].Destinations != nil || r.Accounts[1].FailoverClasses != nil {
		t.Errorf("defaults: route %v, %+v", r.Route, r.Accounts)
	}
	single, err := base.Routing()
	if err != nil || single.Route != dispatch.RouteFirst || single.Accounts[0].Destinations != nil || single.Accounts[0].FailoverClasses != nil {
		t.Errorf("single account: %+v, %v; want every destination, no failover class, route first", single, err)
	}
}

// TestLoadAccountsKeywords: an account's keyword lists are read upper
// case and trimmed; a list left out stays nil (the defaults).
func TestLoadAccountsKeywords(t *testing.T) {
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "accounts.yaml", "accounts:\n"+okOTP+"    opt_out_keywords: [\" arret \", Alto]\n    help_keywords: [aide]\n"+okBulk)
	r, err := loadAccounts(base.Process, path)
	if err != nil {
		t.Fatal(err)
	}
	otp, bulk := r.Accounts[0], r.Accounts[1]
	if !reflect.DeepEqual(otp.OptOutKeywords, []string{"ARRET", "ALTO"}) || otp.OptInKeywords != nil || !reflect.DeepEqual(otp.HelpKeywords, []string{"AIDE"}) {
		t.Errorf("otp's keywords: %q %q %q", otp.OptOutKeywords, otp.OptInKeywords, otp.HelpKeywords)
	}
	if bulk.OptOutKeywords != nil || bulk.OptInKeywords != nil || bulk.HelpKeywords != nil {
		t.Errorf("bulk's keywords without the keys: %q %q %q, want nil (the defaults)", bulk.OptOutKeywords, bulk.OptInKeywords, bulk.HelpKeywords)
	}
}

// TestRoutesFileOrder: a class's accounts are in file order, whatever the
// order of each account's classes.
func TestRoutesFileOrder(t *testing.T) {
	c := func(cs ...admission.Class) Account { return Account{Classes: cs} }
	setups := []Account{
		c(admission.Marketing),
		c(admission.OTP),
		c(admission.Marketing, admission.OTP),
		c(admission.OTP, admission.Marketing),
	}
	want := map[admission.Class][]int{admission.OTP: {1, 2, 3}, admission.Marketing: {0, 2, 3}}
	if r := routes(setups); !reflect.DeepEqual(r, want) {
		t.Errorf("routes %v, want %v", r, want)
	}
	if r := routes(nil); r[admission.OTP] != nil || r[admission.Marketing] != nil {
		t.Errorf("routes of none %v", r)
	}
}

// TestAccountKeysNameSettings: a value that cannot work names its YAML key
// when an account of ACCOUNTS_FILE gives it, never its variable, and its
// variable when the environment does. Every setting an account sets has a
// case.
func TestAccountKeysNameSettings(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	const (
		generic = "provider: generic, generic: {url: https://a.example, token: t}"
		twilio  = "SMS_PROVIDER=twilio TWILIO_ACCOUNT_SID=AC1 TWILIO_AUTH_TOKEN=t "
		vonage  = "SMS_PROVIDER=vonage VONAGE_API_KEY=k VONAGE_API_SECRET=s "
	)
	tests := []struct {
		env, key string
		environ  string // the bad value in the environment, and what it needs
		account  string // the same in an account of the file
	}{
		{"SMS_PROVIDER_URL", "generic.url", "SMS_PROVIDER_URL=a.example", "provider: generic, generic: {url: a.example, token: t}"},
		{"SMS_PROVIDER_TOKEN", "generic.token", "SMS_PROVIDER_URL=https://a.example SMS_PROVIDER_TOKEN=t\x01", `provider: generic, generic: {url: https://a.example, token: "t\x01"}`},
		{"SMS_PROVIDER_TOKEN_FILE", "generic.token_file", "SMS_PROVIDER_TOKEN_FILE=" + missing, "provider: generic, generic: {url: https://a.example, token_file: " + missing + "}"},
		{"SMS_PROVIDER", "provider", "SMS_PROVIDER=sinch", "provider: sinch"},
		{"TWILIO_ACCOUNT_SID", "twilio.account_sid", "SMS_PROVIDER=twilio TWILIO_ACCOUNT_SID=AC-1 TWILIO_AUTH_TOKEN=t TWILIO_FROM=+1", `provider: twilio, twilio: {account_sid: AC-1, auth_token: t, from: "+1"}`},
		{"TWILIO_AUTH_TOKEN", "twilio.auth_token", "SMS_PROVIDER=twilio TWILIO_ACCOUNT_SID=AC1 TWILIO_AUTH_TOKEN=t\x01 TWILIO_FROM=+1", `provider: twilio, twilio: {account_sid: AC1, auth_token: "t\x01", from: "+1"}`},
		{"TWILIO_AUTH_TOKEN_FILE", "twilio.auth_token_file", "SMS_PROVIDER=twilio TWILIO_ACCOUNT_SID=AC1 TWILIO_FROM=+1 TWILIO_AUTH_TOKEN_FILE=" + missing, `provider: twilio, twilio: {account_sid: AC1, from: "+1", auth_token_file: ` + missing + "}"},
		{"TWILIO_FROM", "twilio.from", twilio, "provider: twilio, twilio: {account_sid: AC1, auth_token: t}"},
		{"TWILIO_MESSAGING_SERVICE_SID", "twilio.messaging_service_sid", twilio + "TWILIO_MESSAGING_SERVICE_SID=MG-1", "provider: twilio, twilio: {account_sid: AC1, auth_token: t, messaging_service_sid: MG-1}"},
		{"TWILIO_API_URL", "twilio.api_url", twilio + "TWILIO_FROM=+1 TWILIO_API_URL=api.twilio.com", `provider: twilio, twilio: {account_sid: AC1, auth_token: t, from: "+1", api_url: api.twilio.com}`},
		{"VONAGE_API_KEY", "vonage.api_key", "SMS_PROVIDER=vonage VONAGE_API_SECRET=s VONAGE_FROM=A", "provider: vonage, vonage: {api_secret: s, from: A}"},
		{"VONAGE_API_SECRET", "vonage.api_secret", "SMS_PROVIDER=vonage VONAGE_API_KEY=k VONAGE_FROM=A", "provider: vonage, vonage: {api_key: k, from: A}"},
		{"VONAGE_API_SECRET_FILE", "vonage.api_secret_file", "SMS_PROVIDER=vonage VONAGE_API_KEY=k VONAGE_FROM=A VONAGE_API_SECRET_FILE=" + missing, "provider: vonage, vonage: {api_key: k, from: A, api_secret_file: " + missing + "}"},
		{"VONAGE_FROM", "vonage.from", vonage, "provider: vonage, vonage: {api_key: k, api_secret: s}"},
		{"VONAGE_API_URL", "vonage.api_url", vonage + "VONAGE_FROM=A VONAGE_API_URL=rest.nexmo.com", "provider: vonage, vonage: {api_key: k, api_secret: s, from: A, api_url: rest.nexmo.com}"},
		{"VONAGE_SIGNATURE_SECRET_FILE", "vonage.signature_secret_file", vonage + "VONAGE_FROM=A VONAGE_SIGNATURE_SECRET_FILE=" + missing, "provider: vonage, vonage: {api_key: k, api_secret: s, from: A, signature_secret_file: " + missing + "}"},
		{"VONAGE_SIGNATURE_METHOD", "vonage.signature_method", vonage + "VONAGE_FROM=A VONAGE_SIGNATURE_METHOD=sha384", "provider: vonage, vonage: {api_key: k, api_secret: s, from: A, signature_method: sha384}"},
		{"SMS_RECEIPT_SECRET_FILE", "generic.receipt_secret_file", "SMS_RECEIPT_SECRET_FILE=" + missing, "provider: generic, generic: {url: https://a.example, token: t, receipt_secret_file: " + missing + "}"},
		{"RATE_UNIT", "rate_unit", "RATE_UNIT=byte", generic + ", rate_unit: byte"},
		{"MAX_SEGMENTS", "max_segments", "MAX_SEGMENTS=0", generic + ", max_segments: 0"},
		{"SMS_ACCOUNT", "name", "SMS_ACCOUNT=a{b", `name: "a{b", ` + generic},
		{"CONTRACT_RPS", "contract_rps", "CONTRACT_RPS=2e6", generic + ", contract_rps: 2e6"},
		{"TARGET_RPS", "target_rps", "TARGET_RPS=120", generic + ", target_rps: 120"},
		{"MARKETING_RPS", "class_rps.marketing", "MARKETING_RPS=95", generic + ", class_rps: {marketing: 95}"},
		{"BURST", "burst", "BURST=0", generic + ", burst: 0"},
		{"MIN_DELIVERED_RATIO", "min_delivered_ratio", "MIN_DELIVERED_RATIO=1.5", generic + ", min_delivered_ratio: 1.5"},
		{"PROVIDER_MAX_INFLIGHT", "max_inflight", "PROVIDER_MAX_INFLIGHT=-1", generic + ", max_inflight: -1"},
	}
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.env] = true
		t.Run(tt.key, func(t *testing.T) {
			env := map[string]string{}
			for _, kv := range strings.Fields(tt.environ) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = strings.ReplaceAll(v, `\x01`, "\x01")
			}
			c, err := loadConfig(env)
			if err == nil {
				err = LimiterError(c.Limiter(c.Account).Validate())
			}
			if err == nil {
				_, _, err = c.Sender(time.Second)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Env != tt.env {
				t.Errorf("from the environment: %v, want a configuration error naming %s", err, tt.env)
			}
			account := tt.account
			if !strings.HasPrefix(account, "name: ") {
				account = "name: x, " + account
			}
			path := writeFile(t, "accounts.yaml", "accounts:\n  - {"+account+", classes: [otp, marketing]}\n")
			_, err = accountsOf(base.Process, path)
			if !errors.As(err, &ce) || ce.Env != "ACCOUNTS_FILE" || !strings.Contains(err.Error(), ": "+tt.key+": ") || strings.Contains(err.Error(), tt.env) {
				t.Errorf("from the file: %v, want a configuration error naming %s, not %s", err, tt.key, tt.env)
			}
		})
	}
	for _, s := range settings {
		if s.key != "" && !covered[s.env] {
			t.Errorf("no case for %s (%s)", s.env, s.key)
		}
	}
}

// routes is dispatch.Route for each class (indexed by admission.Class).
func routes(accounts []Account) map[admission.Class][]int {
	served := Served(accounts)
	return map[admission.Class][]int{admission.OTP: dispatch.Route(served, admission.OTP), admission.Marketing: dispatch.Route(served, admission.Marketing)}
}

// TestLoadAccountsOneAPITwoAccounts: two entries at one generic URL with
// their own tokens are two accounts of the provider, and load.
func TestLoadAccountsOneAPITwoAccounts(t *testing.T) {
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "accounts.yaml", "accounts:\n"+okOTP+strings.Replace(okBulk, "b.example, token: t2", "a.example, token: t3", 1))
	if _, err := accountsOf(base.Process, path); err != nil {
		t.Fatal(err)
	}
}

// loadConfig is the configuration of env and args, every flag registered.
func loadConfig(env map[string]string, args ...string) (Settings, error) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	load := Flags(fs, All, func(k string) string { return env[k] })
	if err := fs.Parse(args); err != nil {
		return Settings{}, err
	}
	return load()
}

// writeFile writes content to a new file in a test directory and returns
// its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// accountsOf is the accounts loadAccounts reads.
func accountsOf(p Process, path string) ([]Account, error) {
	r, err := loadAccounts(p, path)
	return r.Accounts, err
}

// poolOfRates returns the YAML lines of a sender pool of n senders, each of
// its own rate (1, 2, ... n).
func poolOfRates(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "      - {from: \"+1555%07d\", rps: %d}\n", i, i+1)
	}
	return b.String()
}

// TestSameAPI: every spelling of one API's URL is one, and a URL that
// names another port, scheme or path is another.
func TestSameAPI(t *testing.T) {
	want := sameAPI("https://a.example")
	for _, u := range []string{"https://a.example:443", "https://a.example.", "https://a.example/", "https://A.EXAMPLE", "HTTPS://A.Example.:443//"} {
		if got := sameAPI(u); got != want {
			t.Errorf("sameAPI(%q) = %q, want %q as https://a.example's", u, got, want)
		}
	}
	if a, b := sameAPI("http://[::1]:80/sms/"), sameAPI("http://[::1]/sms"); a != b {
		t.Errorf("an IPv6 literal: %q and %q, want one", a, b)
	}
	for _, u := range []string{"http://a.example", "https://a.example:8443", "http://a.example:443", "https://a.example/v2", "https://b.example"} {
		if got := sameAPI(u); got == want {
			t.Errorf("sameAPI(%q) = %q, the same as https://a.example's", u, got)
		}
	}
}
