package config

import (
	"math"
	"slices"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/topology"
)

// What the settings make of the configurations of the packages they drive,
// besides the limiter's (Process.Limiter).

// Unit is what a's rates count, as dispatch counts it: segments with
// RATE_UNIT=segment, else messages.
func (a Account) Unit() dispatch.RateUnit {
	if a.RateUnit == "segment" {
		return dispatch.PerSegment
	}
	return dispatch.PerMessage
}

// Home returns the index of the first account serving class, whatever
// its destinations (dispatch.Route): the account whose rates size the
// flow control of the class's lane. The home of a message, which keeps
// its id's send-once record, is the first account of the routing table's
// route for its class and destination (Routing.Table); the two are one
// when no account lists destinations. Accounts returned by
// Settings.Accounts have one for each class.
func Home(accounts []Account, class admission.Class) int {
	return dispatch.Route(Served(accounts), class)[0]
}

// Outstanding sizes the flow control of class's lane, whose home is the
// account home: no more messages in hand than home could send within the
// class's max wait, and never fewer than 10. The first class (its
// policy's TargetOnly) has the whole target rate in one process; any
// other class its ceiling on home, shared among MAX_SENDERS processes. The rate is in messages: with rates
// in segments, the rate over the longest message's segments, so that a
// backlog of long messages is not pulled faster than it can go (it would
// be nacked, or its leases run out while it waits).
func (p Process) Outstanding(class admission.Class, home Account) int {
	classes := p.ClassList()
	// A class not configured is sized as the first.
	c := classes[max(slices.IndexFunc(classes, func(c Class) bool { return c.Name == class }), 0)]
	rps, maxWait, senders := home.TargetRPS, c.MaxWait, 1
	if !p.Policy(c.Name).TargetOnly {
		rps, senders = home.ceiling(class), p.MaxSenders
	}
	rps /= float64(home.MaxCost())
	return max(10, int(math.Ceil(rps*maxWait.Seconds()/float64(senders))))
}

// ceiling is class's ceiling on a: its class_rps, else MarketingRPS for
// marketing, else what the reserves of the classes before it leave it
// (TargetRPS without one).
func (a Account) ceiling(class admission.Class) float64 {
	if v, ok := a.ClassRPS[class]; ok {
		return v
	}
	if class == admission.Marketing {
		return a.MarketingRPS
	}
	// What the reserves of the classes before it leave it.
	room := a.TargetRPS
	for _, c := range a.Classes {
		if c == class {
			break
		}
		if r := a.ReserveRPS[c]; r > 0 {
			room = min(room, a.TargetRPS-r)
		}
	}
	return room
}

// StatusInspect is the subscription setup creates on STATUS_TOPIC, for
// people and tests to read the status events.
const StatusInspect = "sms-status-inspect"

// SuppressionsInspect is the subscription setup creates on
// SUPPRESSIONS_TOPIC, for people and tests to read the list's changes.
const SuppressionsInspect = "sms-suppressions-inspect"

// InboundInspect is the subscription setup creates on INBOUND_TOPIC, for
// the application (and tests) to read the recipients' messages.
const InboundInspect = "sms-inbound-inspect"

// VerificationsSubscription is the dispatcher's subscription on
// VERIFICATIONS_TOPIC, which every process pulls (the guard's
// min_conversion).
const VerificationsSubscription = "sms-verifications-dispatcher"

// Topology is what p names of Pub/Sub, for topology.Setup: every class's
// topic and subscription, in priority order.
func (p Process) Topology() topology.Topology {
	t := topology.Topology{
		OTPTopic: p.OTPTopic, MarketingTopic: p.MarketingTopic, DeadLetterTopic: p.DeadLetterTopic,
		OTPSubscription: p.OTPSubscription, MarketingSubscription: p.MarketingSubscription,
		DeadLetterInspect: p.DeadLetterInspect, DeadLetterRetention: p.DeadLetterRetention,
		StatusTopic: p.StatusTopic, StatusInspect: StatusInspect,
		VerificationsTopic: p.VerificationsTopic, VerificationsSubscription: VerificationsSubscription,
		SendTimeout: p.SendTimeout,
		Inspected: []topology.Inspected{
			{Topic: p.SuppressionsTopic, Inspect: SuppressionsInspect},
			{Topic: p.InboundTopic, Inspect: InboundInspect},
		},
	}
	for _, c := range p.ClassList() {
		t.Lanes = append(t.Lanes, topology.Lane{Topic: c.Topic, Subscription: c.Subscription, RetriedSoon: p.Policy(c.Name).RetriedSoon})
		t.MaxWait = max(t.MaxWait, c.MaxWait)
	}
	return t
}
