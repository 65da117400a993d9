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
		return config.SettingError([]string{"OTP_SUBSCRIPTION", "MARKETING_SUBSCRIPTION"}[se.Index], config.OneLine(se.Error()))
	case err != nil:
		return errors.New(config.OneLine(err.Error()))
	}
	return nil
}
