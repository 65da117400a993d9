package main

import (
	"context"
	"errors"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/config"
	"smsdispatcher/internal/topology"
)

// subscriptionCheckTimeout bounds serve's start-up check of its
// subscriptions: a Pub/Sub that does not answer within it stops the
// process; a variable for the tests.
var subscriptionCheckTimeout = 10 * time.Second

// checkSubscriptions is topology.CheckSubscriptions of cfg's two
// subscriptions, its error in one line: a configuration error naming the
// subscription's variable when the subscription cannot be pulled as set.
func checkSubscriptions(ctx context.Context, c *pubsub.Client, cfg config.Settings, timeout time.Duration) error {
	err := topology.CheckSubscriptions(ctx, c, []string{cfg.OTPSubscription, cfg.MarketingSubscription}, timeout)
	var se *topology.SubscriptionError
	switch {
	case errors.As(err, &se):
		v := [][2]string{{"OTP_SUBSCRIPTION", "otp-subscription"}, {"MARKETING_SUBSCRIPTION", "marketing-subscription"}}[se.Index]
		return &config.Error{Env: v[0], Flag: v[1], Msg: config.OneLine(se.Error())}
	case err != nil:
		return errors.New(config.OneLine(err.Error()))
	}
	return nil
}
