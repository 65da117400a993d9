package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// notNumbers are values a hand-typed SET may leave in a key the scripts
// read as a number: Lua's tonumber reads the first five as NaN or inf.
var notNumbers = []string{"nan", "-nan", "inf", "-inf", "1e999", "garbage"}

// decisions admits on l as a quick burst of callers would: seven that do
// not wait, one that waits briefly (it takes a wake ticket), one more that
// does not; it returns which were allowed, and fails the test on a denial
// whose wait is not within a slot of the account's rate.
func decisions(t *testing.T, l *Limiter, class Class) []bool {
	t.Helper()
	var got []bool
	for i := range 9 {
		var d Decision
		var err error
		if i == 7 {
			d, err = l.Admit(context.Background(), class, 1, 10*time.Millisecond, Claim{})
		} else {
			d, err = l.tryOnce(context.Background(), class)
		}
		if err != nil {
			t.Fatalf("admission %d: %v", i+1, err)
		}
		if d.Source != SourceRedis {
			t.Fatalf("admission %d: %+v, want Redis's decision", i+1, d)
		}
		if !d.Allowed && (d.RetryAfter < 0 || d.RetryAfter > 2*time.Second) {
			t.Fatalf("admission %d: denied for %v (%s), want within a slot at 1/s", i+1, d.RetryAfter, d.Reason)
		}
		got = append(got, d.Allowed)
	}
	return got
}

// A number the scripts read from Redis that is no number in [0, 2^53)
// (NaN, inf: a hand-typed SET) is read as none, as the override's rates
// are: the account admits at its rate, exactly as one without the key,
// and is never locked for the 2^53 µs a NaN TAT would be written as.
func TestANumberInRedisThatIsNoneIsReadAsNone(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	threeClasses := func(c *Config) {
		c.TargetRPS, c.MarketingRPS = 2, 0
		c.Classes = []ClassLimit{{Name: OTP, Reserve: 1}, {Name: "transactional", RPS: 1}, {Name: Marketing, RPS: 1}}
	}
	pool := func(c *Config) { c.Senders = []Sender{{From: "+15550000001", RPS: 1}} }
	for _, tt := range []struct {
		key   string // after the account's tag
		class Class
		cfg   func(*Config)
	}{
		{":tat:global", OTP, nil},
		{":tat:global", Marketing, nil},
		{":tat:marketing", Marketing, nil},
		{":wake:marketing", Marketing, nil},
		{":wake:otp", OTP, nil},
		{":tat:after:otp", "transactional", threeClasses},
		{":tat:after:otp", Marketing, threeClasses},
		{":wake:transactional", "transactional", threeClasses},
		{":tat:sender:", OTP, pool},
		{":tat:sender:+15550000001", OTP, pool},
	} {
		cfg := func() Config {
			c := slowConfig(t)
			c.Account = redistest.UniqueAccount(t)
			if tt.cfg != nil {
				tt.cfg(&c)
			}
			return c
		}
		want := decisions(t, newLimiter(t, rdb, cfg()), tt.class) // the key absent
		for _, v := range notNumbers {
			t.Run(fmt.Sprintf("%s=%s,%s", tt.key, v, tt.class), func(t *testing.T) {
				l := newLimiter(t, rdb, cfg())
				if err := rdb.Set(ctx, l.key.Tag()+tt.key, v, 0).Err(); err != nil {
					t.Fatal(err)
				}
				if got := decisions(t, l, tt.class); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("allowed %v, want %v as without the key", got, want)
				}
			})
		}
	}
}

// A 429's penalty moves a global TAT that is no number to its end, as it
// would a missing one: the account does not burst when the penalty ends.
func TestAPenaltyMovesATATThatIsNoNumber(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	for _, v := range notNumbers {
		t.Run(v, func(t *testing.T) {
			l := newLimiter(t, rdb, slowConfig(t))
			if err := rdb.Set(ctx, l.base.GlobalTAT, v, 0).Err(); err != nil {
				t.Fatal(err)
			}
			before := redisNow(t, rdb)
			if err := l.ReportThrottled(ctx, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			tat, err := rdb.Get(ctx, l.base.GlobalTAT).Int64()
			if err != nil || tat < before+5_000_000 || tat > before+20_000_000 {
				t.Fatalf("global TAT after a 5 s penalty = %d, %v; want its end plus tau, past %d", tat, err, before+5_000_000)
			}
		})
	}
}

// A story whose numbers are none (hand-typed) folds a receipt as one
// without them: its parts one, its send's instant unknown.
func TestAReceiptReadsAStorysNumbersThatAreNoneAsNone(t *testing.T) {
	rdb := redistest.Client(t)
	for _, v := range notNumbers {
		t.Run(v, func(t *testing.T) {
			l := newLimiter(t, rdb, testConfig(t))
			keepStory(t, l, "m", ledger.Story{Class: "otp", ProviderIDs: []string{"p"}})
			plantStory(t, rdb, ledger.PIDKey(l.key, "p"), map[string]string{"id": "m", "n": v, "sent": v, "ov": v, "class": "otp", "p1": "p"})
			f := fold(t, l, report("p", "delivered", ""))
			if f.Status != "delivered" || !f.Final || !f.SentAt.IsZero() {
				t.Fatalf("fold = %+v, want delivered, final, sent at an unknown instant", f)
			}
		})
	}
}

// The scripts that read a TAT or a count read it with one helper, the same
// text in each (a script cannot call another's): the admission script's
// prelude's num (status's status.lua too: TestStatusReadsNumbersWithTheAdmissionScriptsHelper).
func TestTheScriptsReadNumbersWithOneHelper(t *testing.T) {
	def := func(name, src string) string {
		t.Helper()
		i := strings.Index(src, "local function num(v)\n")
		j := strings.Index(src[max(i, 0):], "\nend\n")
		if i < 0 || j < 0 {
			t.Fatalf("%s defines no num(v)", name)
		}
		return src[i : i+j+5]
	}
	want := def("admit/prelude.lua", fullAdmitLua(t))
	for name, src := range map[string]string{"penalty.lua": penaltyLua, "resume.lua": resumeLua} {
		if got := def(name, src); got != want {
			t.Errorf("%s's num:\n%s\nwant the prelude's:\n%s", name, got, want)
		}
	}
}
