package status

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// fixedClock is a Limiter's clock stopped at one instant, so that every
// send it settles counts in that second.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// TestReadThreeClasses reads an account of three configured classes from
// a real Redis: the report lists them in priority order, each with its
// ceiling and reserve, its sends of the last second and its delivery;
// the text has a line of sends per class in that order, and --watch's
// line a count per class.
func TestReadThreeClasses(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Second)
	const transactional = admission.Class("transactional")
	acct := config.Account{Name: redistest.UniqueAccount(t), Provider: "generic", RateUnit: "message",
		ContractRPS: 100, TargetRPS: 90, MarketingRPS: 70, Burst: 5,
		Classes:    []admission.Class{admission.OTP, transactional, admission.Marketing},
		ClassRPS:   map[admission.Class]float64{transactional: 30, admission.Marketing: 70},
		ReserveRPS: map[admission.Class]float64{admission.OTP: 20}}
	cfg := config.Process{MaxSenders: 3, RedisTimeout: time.Second}.Limiter(acct)
	if len(cfg.Classes) != 3 {
		t.Fatalf("the limiter's classes %v, want three", cfg.Classes)
	}
	rdb := redistest.Client(t)
	lim, err := admission.New(rdb, cfg, admission.WithClock(fixedClock{t0}))
	if err != nil {
		t.Fatal(err)
	}
	sends := map[admission.Class]int{admission.OTP: 3, transactional: 2, admission.Marketing: 1}
	for class, n := range sends {
		for range n {
			d, err := lim.Admit(ctx, class, 1, time.Second, admission.Claim{})
			if err != nil || !d.Allowed {
				t.Fatalf("acquire %s: %+v (%v)", class, d, err)
			}
			if err := lim.Settle(ctx, d, ledger.RecordSent, admission.ResultNone, ledger.Story{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	r, err := Read(ctx, Redis{Client: rdb}, []Setup{{Account: acct, Limiter: lim}}, config.Routing{}, t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	a := r.Accounts[0]
	if want := []string{"otp", "transactional", "marketing"}; !reflect.DeepEqual(a.Classes, want) {
		t.Errorf("classes %v, want %v", a.Classes, want)
	}
	wantRates := []ClassRate{{"otp", 90, 20}, {"transactional", 30, 0}, {"marketing", 70, 0}}
	if !reflect.DeepEqual(a.ClassRates, wantRates) {
		t.Errorf("class rates %+v, want %+v", a.ClassRates, wantRates)
	}
	for class, n := range sends {
		s := a.Sent[class.String()]
		if s == nil || s.Last1s != n || s.Last60s != n || len(s.PerSecond) != seconds || s.PerSecond[seconds-1] != n {
			t.Errorf("sent %s %+v, want %d in the last second", class, s, n)
		}
		if d := a.Delivery[class.String()]; d == nil || d.DeliveredRatio != nil {
			t.Errorf("delivery %s %+v, want one without finals", class, d)
		}
	}

	var text bytes.Buffer
	r.WriteText(&text)
	var lines []string // each line's words, one space apart
	for l := range strings.Lines(text.String()) {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"serves otp, transactional and marketing,",
		"rates contract 100/s, target 90/s, transactional 30/s, marketing 70/s; reserved from the classes after it: otp 20/s\n",
		"sent otp 3 in the last 1 s",
		"sent transactional 2 in the last 1 s",
		"sent marketing 1 in the last 1 s",
		"delivery transactional (last 5 min) no final receipts",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("text lacks %q:\n%s", want, got)
		}
	}
	if i, j, k := strings.Index(got, "sent otp"), strings.Index(got, "sent transactional"), strings.Index(got, "sent marketing"); !(i < j && j < k) {
		t.Errorf("sent lines not in priority order:\n%s", got)
	}
	if line := a.line(r.Time); !strings.Contains(line, " otp=3 transactional=2 marketing=1 ") {
		t.Errorf("watch line %q, want a count per class in priority order", line)
	}

	b, err := json.Marshal(a)
	if err != nil || !strings.Contains(string(b), `"class_rates":[{"class":"otp","ceiling_rps":90,"reserve_rps":20},{"class":"transactional","ceiling_rps":30,"reserve_rps":0},`) {
		t.Errorf("json %s (%v)", b, err)
	}
}
