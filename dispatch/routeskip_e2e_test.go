package dispatch_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
)

// OTPs to numbers whose handsets the primary's carrier cannot reach (30003:
// what anyone can cause by asking for codes to such numbers) fail there and
// are resent through the backup, but never skip the primary's route to
// +62; the carrier's filter (30007) on as many numbers does.
func TestARouteIsSkippedForItsCarriersFilterNotForUnreachableNumbers(t *testing.T) {
	t.Parallel()
	r := newRig(t, primaryAndBackup(), rigOptions{dispatch: dispatch.Config{OTPMaxWait: 500 * time.Millisecond}})
	primary := r.sims["primary"]
	burst := func(name string, n int) {
		t.Helper()
		var ids []string
		for i := range n {
			id := fmt.Sprintf("%s-%d", name, i)
			ids = append(ids, id)
			r.publish(admission.OTP, map[string]any{"id": id, "to": fmt.Sprintf("+62812%08d", i), "body": "Your code is 482913",
				"deadline": time.Now().Add(30 * time.Second).Format(time.RFC3339Nano)})
		}
		r.waitFor(name+"'s status events", 15*time.Second, func() bool {
			for _, id := range ids {
				if len(r.statusOf(id)) < 2 { // the primary's failure, the backup's delivery
					return false
				}
			}
			return true
		})
		r.settle()
	}
	skippedNow := func() bool {
		t.Helper()
		d, err := r.limiters["primary"].Admit(context.Background(), admission.OTP, 1, time.Millisecond, admission.Claim{Prefix: "+62", Failover: true})
		if err != nil {
			t.Fatal(err)
		}
		return !d.Allowed && d.Reason == admission.ReasonRouteSkipped
	}

	primary.SetDelivered("+62", 0, "30003")
	burst("unreachable", 15)
	if skippedNow() {
		t.Fatal("15 OTPs to unreachable handsets (30003) skipped the primary's route to +62")
	}
	primary.SetDelivered("+62", 0, "30007")
	burst("filtered", 12)
	if !skippedNow() {
		t.Fatal("12 OTPs filtered by the carrier (30007), to 12 numbers, did not skip the primary's route to +62")
	}
}

// measureRouteEnv, set, runs TestMeasureTheRouteMove: a measurement of
// real time (docs/measurements-runs.md), not a test CI runs.
const measureRouteEnv = "SMS_MEASURE_ROUTE_MOVE"

// TestMeasureTheRouteMove measures how long the primary's route to +62
// takes to move to the backup once its carrier filters it (30007), OTP at
// 2/s to a new number each: 30 s delivered, then 60 s filtered. It
// reports when the skip was set after the filter began, and how many OTPs
// failed on the primary first (each cost a second send); it fails above
// 15 s. Only with SMS_MEASURE_ROUTE_MOVE=1: it takes 90 s of real time.
func TestMeasureTheRouteMove(t *testing.T) {
	if os.Getenv(measureRouteEnv) != "1" {
		t.Skipf("a measurement of 90 s: %s=1 runs it", measureRouteEnv)
	}
	const (
		rate     = 2.0
		healthy  = 30 * time.Second
		filtered = 60 * time.Second
	)
	r := newRig(t, primaryAndBackup(), rigOptions{dispatch: dispatch.Config{OTPMaxWait: 500 * time.Millisecond}})
	rdb := redistest.Client(t)
	skip := keys.For(r.limiters["primary"].Account()).Skip("+62")
	published := map[string]time.Time{}
	var ids []string
	var filterAt, movedAt time.Time
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	start := time.Now()
	for n := 0; time.Since(start) < healthy+filtered; n++ {
		<-tick.C
		if filterAt.IsZero() && time.Since(start) >= healthy {
			r.sims["primary"].SetDelivered("+62", 0, "30007")
			filterAt = time.Now()
		}
		id := fmt.Sprint("otp-", n)
		ids = append(ids, id)
		published[id] = r.publish(admission.OTP, map[string]any{"id": id, "to": fmt.Sprintf("+62812%08d", n), "body": "Your code is 482913",
			"deadline": time.Now().Add(30 * time.Second).Format(time.RFC3339Nano)})
		if movedAt.IsZero() && !filterAt.IsZero() && rdb.Exists(context.Background(), skip).Val() == 1 {
			movedAt = time.Now()
		}
	}
	r.settle()
	failedFirst := 0
	for _, id := range ids {
		if at := published[id]; !at.Before(filterAt) && (movedAt.IsZero() || at.Before(movedAt)) {
			if s := r.sends(id); len(s) > 0 && s[0].Account == "primary" {
				failedFirst++
			}
		}
	}
	if movedAt.IsZero() {
		t.Fatalf("the route did not move within %v of the filter (%d OTPs failed on the primary first)", filtered, failedFirst)
	}
	moved := movedAt.Sub(filterAt)
	t.Logf("OTP %g/s, %v delivered then filtered (30007): the route moved %.1fs after the filter began; %d OTPs failed on the primary first",
		rate, healthy, moved.Seconds(), failedFirst)
	if moved > 15*time.Second {
		t.Fatalf("the route moved %v after the filter began, want within 15s", moved)
	}
}
