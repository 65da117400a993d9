package alertrecord

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"time"

	"smsdispatcher/provider/providertest"
	"smsdispatcher/tools/internal/redisserver"
)

// inboundListeners are, for a run with opt-outs, each pod's settings of
// its own (its receipts listener on a free loopback port; the public URL,
// pod a's, and the generic API's receipt secret, the token file, for all)
// and the pods' inbound webhooks of account.
func inboundListeners(pods int, account, tokenFile string) (env [][]string, webhooks []string, err error) {
	var addrs []string
	for range pods {
		port, err := redisserver.FreePort()
		if err != nil {
			return nil, nil, err
		}
		addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	for _, addr := range addrs {
		env = append(env, []string{"RECEIPTS_ADDR=" + addr, "RECEIPTS_PUBLIC_URL=http://" + addrs[0], "SMS_RECEIPT_SECRET_FILE=" + tokenFile})
		webhooks = append(webhooks, "http://"+addr+"/v1/inbound/"+account)
	}
	return env, webhooks, nil
}

// replyStop posts the run's STOP replies from start until ctx ends: in
// each of its optOuts at its rate, each from a number of its own, to the
// webhooks in turn, signed by sim with the run's token (the generic
// API's receipt secret). A reply not answered 200 is told on stderr.
func (r alertRun) replyStop(ctx context.Context, sim *providertest.Simulator, webhooks []string, start time.Time, stderr io.Writer) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	posted := make([]int, len(r.optOuts))
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		el := time.Since(start)
		for i, sp := range r.optOuts {
			for ; posted[i] < sp.due(el); posted[i]++ {
				m := providertest.Inbound{ID: fmt.Sprintf("%s-stop-%d", r.name, n), From: fmt.Sprintf("+8170%08d", n), To: "+15005550006", Body: "STOP"}
				status, _, err := sim.PostInbound(ctx, webhooks[n%len(webhooks)], m, recordToken, "")
				if ctx.Err() != nil {
					return
				}
				if err != nil || status != 200 {
					fmt.Fprintf(stderr, "alertrecord: %s: the STOP %s answered %d, %v\n", r.name, m.ID, status, err)
				}
				n++
			}
		}
	}
}

// due is how many of sp's replies are due el after the run's start: one
// at sp.from, then one every 1/rate s before sp.until.
func (sp optOutSpan) due(el time.Duration) int {
	if el < sp.from {
		return 0
	}
	all := int(math.Ceil((sp.until - sp.from).Seconds() * sp.rate))
	return min(all, int((el-sp.from).Seconds()*sp.rate)+1)
}
