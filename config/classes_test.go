package config

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config/policy"
	"smsdispatcher/internal/topology"
)

// threeClasses is the operating guide's file of three lanes: cart
// reminders (transactional) between OTP and the campaigns.
const threeClasses = `classes:
  - {name: otp,           topic: sms-otp,           subscription: sms-otp-dispatcher,           max_wait: 1s}
  - {name: transactional, topic: sms-transactional, subscription: sms-transactional-dispatcher, max_wait: 4s}
  - {name: marketing,     topic: sms-marketing,     subscription: sms-marketing-dispatcher,     max_wait: 8s}
accounts:
  - name: main
    provider: generic
    generic: {url: "https://sms.example.com", token: t1}
    contract_rps: 100
    target_rps: 90
    burst: 5
    classes: [marketing, otp, transactional]
    class_rps: {transactional: 30, marketing: 70}
    reserve_rps: {otp: 20}
`

// TestThreeClassesLoad: a file of three classes loads into its lanes in
// priority order, the account's classes in that order whatever the
// file's, its ceilings and reserves, the limiter's classes, each lane's
// flow control and setup's topology; every command that reads topics or
// subscriptions sees the lanes.
func TestThreeClassesLoad(t *testing.T) {
	path := writeFile(t, "accounts.yaml", threeClasses)
	cfg, err := loadConfig(map[string]string{"ACCOUNTS_FILE": path, "MAX_SENDERS": "4"})
	if err != nil {
		t.Fatal(err)
	}
	lanes := []Class{
		{Name: "otp", Topic: "sms-otp", Subscription: "sms-otp-dispatcher", MaxWait: time.Second},
		{Name: "transactional", Topic: "sms-transactional", Subscription: "sms-transactional-dispatcher", MaxWait: 4 * time.Second},
		{Name: "marketing", Topic: "sms-marketing", Subscription: "sms-marketing-dispatcher", MaxWait: 8 * time.Second},
	}
	if !reflect.DeepEqual(cfg.Lanes, lanes) || !reflect.DeepEqual(cfg.ClassList(), lanes) {
		t.Fatalf("lanes %+v, want %+v", cfg.Lanes, lanes)
	}
	r, err := cfg.Routing()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Classes, lanes) {
		t.Errorf("routing's classes %+v, want %+v", r.Classes, lanes)
	}
	a := r.Accounts[0]
	if !reflect.DeepEqual(a.Classes, []admission.Class{"otp", "transactional", "marketing"}) ||
		!reflect.DeepEqual(a.ClassRPS, map[admission.Class]float64{"transactional": 30, "marketing": 70}) ||
		!reflect.DeepEqual(a.ReserveRPS, map[admission.Class]float64{"otp": 20}) {
		t.Errorf("account classes %v, class_rps %v, reserve_rps %v", a.Classes, a.ClassRPS, a.ReserveRPS)
	}
	lc := cfg.Limiter(a)
	want := []admission.ClassLimit{
		{Name: "otp", RPS: 90, Reserve: 20, Policy: policy.Of("otp", 0)},
		{Name: "transactional", RPS: 30, Policy: policy.Of("transactional", 1)},
		{Name: "marketing", RPS: 70, Policy: policy.Of("marketing", 2)},
	}
	if !reflect.DeepEqual(lc.Classes, want) {
		t.Errorf("limiter classes %+v, want %+v", lc.Classes, want)
	}
	if err := lc.Validate(); err != nil {
		t.Errorf("limiter: %v", err)
	}
	// otp: 90/s × 1s in one process; transactional 30/s × 4s and
	// marketing 70/s × 8s over 4 processes.
	for class, n := range map[admission.Class]int{"otp": 90, "transactional": 30, "marketing": 140} {
		if got := cfg.Outstanding(class, a); got != n {
			t.Errorf("Outstanding(%s) = %d, want %d", class, got, n)
		}
	}
	top := cfg.Topology()
	wantLanes := []topology.Lane{
		{Topic: "sms-otp", Subscription: "sms-otp-dispatcher", RetriedSoon: true},
		{Topic: "sms-transactional", Subscription: "sms-transactional-dispatcher"},
		{Topic: "sms-marketing", Subscription: "sms-marketing-dispatcher"},
	}
	if !reflect.DeepEqual(top.Lanes, wantLanes) || top.MaxWait != 8*time.Second {
		t.Errorf("topology lanes %v, max wait %v; want %v, 8s", top.Lanes, top.MaxWait, wantLanes)
	}
}

// TestClassDefaults: a class's topic and subscription default to
// sms-<name> and sms-<name>-dispatcher, its max wait to 1s for the first
// and 8s for the others; otp and marketing take theirs from today's
// variables; suppression: false is kept (Unsuppressed). Without the key,
// the classes are otp then marketing of the
// variables.
func TestClassDefaults(t *testing.T) {
	path := writeFile(t, "accounts.yaml", "classes:\n  - {name: first, suppression: false}\n  - {name: otp, suppression: true}\n  - {name: cart-reminders}\n  - {name: marketing, max_wait: 30s}\n"+
		"accounts:\n  - name: main\n    provider: generic\n    generic: {url: https://a.example, token: t1}\n    classes: [first, otp, cart-reminders, marketing]\n")
	p := Process{OTPTopic: "otp-env", OTPSubscription: "otp-env-sub", OTPMaxWait: 2 * time.Second,
		MarketingTopic: "mkt-env", MarketingSubscription: "mkt-env-sub", MarketingMaxWait: 9 * time.Second}
	got, err := LoadClasses(p, path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Class{
		{Name: "first", Topic: "sms-first", Subscription: "sms-first-dispatcher", MaxWait: time.Second, Unsuppressed: true},
		{Name: "otp", Topic: "otp-env", Subscription: "otp-env-sub", MaxWait: 2 * time.Second},
		{Name: "cart-reminders", Topic: "sms-cart-reminders", Subscription: "sms-cart-reminders-dispatcher", MaxWait: 8 * time.Second},
		{Name: "marketing", Topic: "mkt-env", Subscription: "mkt-env-sub", MaxWait: 30 * time.Second},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("classes\n got %+v\nwant %+v", got, want)
	}
	cfg, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Lanes != nil || len(cfg.ClassList()) != 2 || cfg.ClassList()[0].Topic != "sms-otp" || cfg.ClassList()[1].Subscription != "sms-marketing-dispatcher" {
		t.Errorf("without ACCOUNTS_FILE: lanes %v, classes %+v; want none, otp then marketing", cfg.Lanes, cfg.ClassList())
	}
}

// TestClassesErrors: each refusal of the classes and of an account's
// class_rps and reserve_rps is one line naming the file, the account and
// the key.
func TestClassesErrors(t *testing.T) {
	classes := "classes: [{name: otp}, {name: transactional}, {name: marketing}]\n"
	acct := func(keys string) string {
		return "accounts:\n  - name: main\n    provider: generic\n    generic: {url: https://a.example, token: t1}\n    classes: [otp, transactional, marketing]\n" + keys
	}
	tests := []struct {
		name, content, want string
	}{
		{"bad name", "classes: [{name: Cart}]\n" + acct(""), `: line 1: classes[0].name: want 1 to 32 of a-z, 0-9, _ and -, got "Cart"`},
		{"no name", "classes: [{topic: t}]\n" + acct(""), `: line 1: classes[0].name: required`},
		{"global", "classes: [{name: otp}, {name: global}]\n" + acct(""), `: line 1: classes[1].name: global names the account's own rate`},
		{"name twice", "classes: [{name: otp}, {name: otp}]\n" + acct(""), `: line 1: classes[1].name: otp is also classes[0]`},
		{"topic twice", "classes: [{name: otp}, {name: a, topic: sms-otp}]\n" + acct(""), `: line 1: classes[1].topic: "sms-otp" is also the topic of classes[0]`},
		{"subscription twice", "classes: [{name: a, subscription: s}, {name: b, subscription: s}]\n" + acct(""), `: line 1: classes[1].subscription: "s" is also the subscription of classes[0]`},
		{"the dead-letter topic", "classes: [{name: otp}, {name: dead-letter}]\n" + acct(""), `: line 1: classes[1].topic: "sms-dead-letter" is the dead-letter or status topic`},
		{"the status topic", "classes: [{name: otp}, {name: status}]\n" + acct(""), `: line 1: classes[1].topic: "sms-status" is the dead-letter or status topic`},
		{"an inspect subscription", "classes: [{name: otp}, {name: b, subscription: sms-dead-letter-inspect}]\n" + acct(""), `: line 1: classes[1].subscription: "sms-dead-letter-inspect" is the dead-letter or status topic's inspect subscription`},
		{"bad max_wait", "classes: [{name: otp, max_wait: soon}]\n" + acct(""), `: line 1: classes[0].max_wait: want a duration such as 4s, got "soon"`},
		{"empty classes", "classes: []\n" + acct(""), `: line 1: classes: an empty list would serve nothing`},
		{"unknown key of a class", "classes: [{name: otp, rps: 3}]\n" + acct(""), `: line 1: classes[0].rps: unknown key (classes[0] takes name, topic, subscription, max_wait, suppression, send_hours, send_hours_by_prefix, default_zone, closed_dates, closed_dates_by_prefix, max_per_recipient, release_spread)`},
		{"account class not configured", classes + strings.Replace(acct(""), "marketing]", "marketing, cart]", 1),
			`: account "main": classes[3]: want otp, transactional or marketing, got "cart"`},
		{"class nobody serves", classes + strings.Replace(acct(""), "transactional, ", "", 1), `: classes: no account serves transactional`},
		{"class_rps of an unknown class", classes + acct("    class_rps: {cart: 3}\n"), `: line 7: account "main": class_rps.cart: unknown key (class_rps takes otp, transactional, marketing)`},
		{"class_rps of the first class", classes + acct("    class_rps: {otp: 3}\n"), `: account "main": class_rps.otp: OTP is capped only by target_rps`},
		{"class_rps above target", classes + acct("    class_rps: {transactional: 95}\n"), `: account "main": class_rps.transactional: 95 is above target_rps (90)`},
		{"class_rps zero", classes + acct("    class_rps: {transactional: 0}\n"), `: account "main": class_rps.transactional: must be a finite number of at least 0.01, got 0`},
		{"class_rps of a class not served", classes + strings.Replace(acct("    class_rps: {transactional: 5}\n"), "classes: [otp, transactional, marketing]", "classes: [otp, marketing]", 1) +
			"  - name: b\n    provider: generic\n    generic: {url: https://b.example, token: t2}\n    classes: [transactional]\n",
			`: account "main": class_rps.transactional: the account does not serve transactional`},
		{"reserve_rps of an unknown class", classes + acct("    reserve_rps: {cart: 3}\n"), `: line 7: account "main": reserve_rps.cart: unknown key (reserve_rps takes otp, transactional, marketing)`},
		{"reserve_rps on the last class", classes + acct("    reserve_rps: {marketing: 3}\n"), `: account "main": reserve_rps.marketing: marketing is the account's last class`},
		{"reserve_rps at target", classes + acct("    reserve_rps: {otp: 90}\n"), `: account "main": reserve_rps.otp: must be at least 0 and below target_rps (90), got 90`},
		{"reserve_rps negative", classes + acct("    reserve_rps: {otp: -1}\n"), `: account "main": reserve_rps.otp: must be at least 0`},
		{"a ceiling above a reserve's room", classes + acct("    class_rps: {transactional: 80}\n    reserve_rps: {otp: 20}\n"),
			`: account "main": class_rps.transactional: 80 cannot hold with reserve_rps.otp (20): the classes after otp share target_rps - 20 = 70`},
		{"a reserve under a default ceiling", classes + acct("    reserve_rps: {otp: 30}\n"),
			`: account "main": reserve_rps.otp: 30 leaves the classes after otp 60, under marketing's ceiling 70`},
		{"a reserve under marketing's default", classes + acct("    class_rps: {transactional: 10}\n    reserve_rps: {transactional: 30}\n"),
			`: account "main": reserve_rps.transactional: 30 leaves the classes after transactional 60, under marketing's ceiling 70`},
		{"failover of the first class", classes + acct("    failover_classes: [otp]\n"), `: account "main": failover_classes[0]: otp always fails over`},
		{"failover of an unknown class", classes + acct("    failover_classes: [cart]\n"), `: account "main": failover_classes[0]: want transactional or marketing, got "cart"`},
	}
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "accounts.yaml", tt.content)
			_, err := loadAccounts(base.Process, path)
			var ce *Error
			if !errors.As(err, &ce) || ce.Env != "ACCOUNTS_FILE" {
				t.Fatalf("loadAccounts: %v; want a configuration error for ACCOUNTS_FILE", err)
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") || !strings.Contains(msg, path+tt.want) {
				t.Errorf("error\n %s\nwant one line with\n %s", msg, path+tt.want)
			}
		})
	}
}

// TestAMiddleClassWithoutACeilingHasWhatTheReservesLeaveIt: a reserve
// needs no class_rps on every class after it: a class without one has
// what the reserves before it leave it.
func TestAMiddleClassWithoutACeilingHasWhatTheReservesLeaveIt(t *testing.T) {
	path := writeFile(t, "accounts.yaml", "classes: [{name: otp}, {name: transactional}, {name: marketing}]\n"+
		"accounts:\n  - name: main\n    provider: generic\n    generic: {url: https://a.example, token: t1}\n    classes: [otp, transactional, marketing]\n"+
		"    class_rps: {marketing: 40}\n    reserve_rps: {otp: 30}\n")
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := loadAccounts(base.Process, path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := base.Process.Limiter(r.Accounts[0])
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the limiter of the file: %v", err)
	}
	if got := cfg.Classes; len(got) != 3 || got[1].RPS != 60 || got[0].Reserve != 30 || got[2].RPS != 40 {
		t.Errorf("classes %+v, want transactional at what otp's reserve 30 leaves (60), marketing 40", got)
	}
}

// TestClassesKeyOfAdmissionsError: an error of admission's classes names
// the key of the file it is about.
func TestClassesKeyOfAdmissionsError(t *testing.T) {
	for reason, want := range map[string]string{
		`"otp": Reserve must be at least 0 and below TargetRPS (90), got 95`:                 "reserve_rps.otp",
		`"marketing": Reserve is for the classes after it, and it is the last`:               "reserve_rps.marketing",
		`"cart": RPS 80 cannot hold with "otp"'s Reserve 20 (the classes after it share 70)`: "class_rps.cart",
		"no class": "classes",
	} {
		if got := classesKey(reason); got != want {
			t.Errorf("classesKey(%q) = %q, want %q", reason, got, want)
		}
	}
}

// TestTheOperatingGuidesClassesExampleLoads: the cart reminders' file of
// docs/configuring.md ("Classes") loads into the three lanes it describes.
func TestTheOperatingGuidesClassesExampleLoads(t *testing.T) {
	b, err := os.ReadFile("../docs/configuring.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "## Classes\n")
	if !ok {
		t.Fatal("docs/configuring.md has no Classes section")
	}
	_, block, ok := strings.Cut(after, "```yaml\n")
	if !ok {
		t.Fatal("the Classes section has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	block = strings.ReplaceAll(block, "/var/run/secrets/main/token", writeFile(t, "token", "main-token\n"))
	cfg, err := loadConfig(map[string]string{"ACCOUNTS_FILE": writeFile(t, "accounts.yaml", block)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := cfg.Routing()
	if err != nil {
		t.Fatalf("the guide's example: %v", err)
	}
	if got := classNames(r.Classes); !reflect.DeepEqual(got, []admission.Class{"otp", "transactional", "marketing"}) {
		t.Fatalf("classes %v", got)
	}
	if a := r.Accounts[0]; a.ReserveRPS["otp"] != 20 || a.ClassRPS["transactional"] != 30 {
		t.Fatalf("account %+v", a)
	}
}
