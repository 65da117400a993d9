package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/config"
)

// optOutPlan is what produce needs of the recipients who reply STOP
// mid-run: their numbers, and reply, which has them reply (once half the
// campaign is sent).
type optOutPlan struct {
	recipients []string
	reply      func()
}

// produce publishes the campaign at once, and OTPs at o.OTPRate (every
// optOutEvery-th to one of plan's recipients) and (with three classes)
// transactional messages at o.TransactionalRate while it runs, has plan's
// recipients reply STOP once half the campaign is sent, shows progress,
// and returns once every published message reached an end (or ctx or the
// timeout ends the run), with the server's ids of the messages it
// published.
func produce(ctx context.Context, ps *pubsub.Client, cfg config.Settings, o Options, stats *stats, plan optOutPlan, progress func()) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	mkt, otp := ps.Publisher(cfg.MarketingTopic), ps.Publisher(cfg.OTPTopic)
	defer mkt.Stop()
	defer otp.Stop()

	var ids []string
	var results []*pubsub.PublishResult
	publish := func(p *pubsub.Publisher, m map[string]string) {
		b, _ := json.Marshal(m)
		results = append(results, p.Publish(ctx, &pubsub.Message{Data: b}))
	}
	phone := func() string { return fmt.Sprintf("+8190%08d", rand.IntN(1e8)) }
	// Ids of this run alone: with REDIS_URL, a Redis that kept the
	// send-once records of an earlier demo would find every id sent.
	run := strconv.FormatUint(rand.Uint64()%(36*36*36*36), 36)
	for i := range o.Campaign {
		to := phone()
		if o.QuietHours && i%quietEvery == 0 {
			to = frenchMobile()
		}
		publish(mkt, map[string]string{"id": fmt.Sprintf("campaign-%s-%d", run, i), "to": to, "body": campaignBody(o.CampaignSegments)})
	}

	var tick, trxTick <-chan time.Time
	if o.OTPRate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / o.OTPRate))
		defer t.Stop()
		tick = t.C
	}
	var trx *pubsub.Publisher
	if o.Classes == 3 && o.TransactionalRate > 0 {
		trx = ps.Publisher(transactionalTopic)
		defer trx.Stop()
		t := time.NewTicker(time.Duration(float64(time.Second) / o.TransactionalRate))
		defer t.Stop()
		trxTick = t.C
	}
	show := time.NewTicker(time.Second)
	defer show.Stop()
	otpN, trxN := 0, 0
	campaignDone := func() bool {
		stats.mu.Lock()
		defer stats.mu.Unlock()
		return stats.sent[admission.Marketing]+stats.expired+stats.dead >= o.Campaign
	}
	halfSent := func() bool {
		stats.mu.Lock()
		defer stats.mu.Unlock()
		return 2*stats.sent[admission.Marketing] >= o.Campaign
	}
	for {
		for len(ids) < len(results) { // collect server IDs as they come
			id, err := results[len(ids)].Get(ctx)
			if err != nil {
				return nil, fmt.Errorf("publish: %w", err)
			}
			ids = append(ids, id)
		}
		if plan.reply != nil && halfSent() {
			plan.reply()
			plan.reply = nil
		}
		if campaignDone() {
			tick, trxTick = nil, nil // the streams end with the campaign
			if stats.allDone(ids) {
				return ids, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("demo did not finish: %w", ctx.Err())
		case <-tick:
			otpN++
			id, to := fmt.Sprintf("otp-%s-%d", run, otpN), phone()
			if n := len(plan.recipients); n > 0 && otpN%optOutEvery == 0 {
				k := (otpN / optOutEvery) % n
				to = plan.recipients[k]
				stats.optOutMessage(id, k)
			}
			publish(otp, map[string]string{
				"id": id, "to": to,
				"body":     fmt.Sprintf("Your code is %06d", rand.IntN(1e6)),
				"deadline": time.Now().Add(time.Minute).UTC().Format(time.RFC3339),
			})
		case <-trxTick:
			trxN++
			publish(trx, map[string]string{
				"id": fmt.Sprintf("transactional-%s-%d", run, trxN), "to": phone(),
				"body": "Your cart is waiting: 2 items",
			})
		case <-show.C:
			progress()
		case <-stats.changed:
		}
	}
}

// campaignBody returns a GSM-7 campaign text of n segments.
func campaignBody(n int) string {
	const text = "Winter sale: 20% off this weekend"
	if n <= 1 {
		return text
	}
	b := strings.Repeat(text+" ", 153*n/len(text)+1)
	return b[:153*n-10] // more than 153×(n-1): n segments
}
