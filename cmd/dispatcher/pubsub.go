package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/topology"
)

// subscriptionCheckTimeout bounds serve's start-up check of its
// subscriptions: a Pub/Sub that does not answer within it stops the
// process; a variable for the tests.
var subscriptionCheckTimeout = 10 * time.Second

// checkSubscriptions is topology.CheckSubscriptions of cfg's classes'
// subscriptions, its error in one line: a configuration error naming the
// subscription's variable (ACCOUNTS_FILE for a class of its classes) when
// the subscription cannot be pulled as set.
func checkSubscriptions(ctx context.Context, c *pubsub.Client, cfg config.Settings, timeout time.Duration) error {
	var subs []string
	for _, k := range cfg.ClassList() {
		subs = append(subs, k.Subscription)
	}
	err := topology.CheckSubscriptions(ctx, c, subs, timeout)
	var se *topology.SubscriptionError
	switch {
	case errors.As(err, &se) && len(cfg.Lanes) > 0:
		return config.SettingError("ACCOUNTS_FILE", config.OneLine(fmt.Sprintf("classes[%d].subscription: %s", se.Index, se.Error())))
	case errors.As(err, &se):
		return config.SettingError([]string{"OTP_SUBSCRIPTION", "MARKETING_SUBSCRIPTION"}[se.Index], config.OneLine(se.Error()))
	case err != nil:
		return errors.New(config.OneLine(err.Error()))
	}
	return nil
}

// checkTopics is topology.CheckTopics of the topics the receipts publish
// to, when they are on: STATUS_TOPIC (the status events) and the first
// class's topic (the resends). Its error is one line naming the variable:
// a topic that cannot be published to would leave every event owed, for
// the sweep to try again and again.
func checkTopics(ctx context.Context, c *pubsub.Client, cfg config.Settings, timeout time.Duration) error {
	if !cfg.ReceiptsOn() {
		return nil
	}
	classes := cfg.ClassList()
	first := max(slices.IndexFunc(classes, func(k config.Class) bool { return k.Name == admission.OTP }), 0)
	err := topology.CheckTopics(ctx, c, []string{cfg.StatusTopic, classes[first].Topic}, timeout)
	var te *topology.TopicError
	switch {
	case errors.As(err, &te) && te.Index == 0:
		return config.SettingError("STATUS_TOPIC", config.OneLine(te.Error()))
	case errors.As(err, &te) && len(cfg.Lanes) > 0:
		return config.SettingError("ACCOUNTS_FILE", config.OneLine(fmt.Sprintf("classes[%d].topic: %s", first, te.Error())))
	case errors.As(err, &te):
		return config.SettingError([]string{"OTP_TOPIC", "MARKETING_TOPIC"}[first], config.OneLine(te.Error()))
	case err != nil:
		return errors.New(config.OneLine(err.Error()))
	}
	return nil
}
