package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
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
