// Package keys builds every Redis key name of the dispatcher, as
// asynq's internal/base does: no other package of the product spells one.
// An account's names are methods of Account, so a caller builds the
// account's tag once (admission keeps it in its Limiter).
//
// The invariant: every key of a provider account begins with the
// account's hash tag {sms:<account>}, so all of them hash to one cluster
// slot and any script may take any of them (Redis Cluster refuses a
// script whose keys span slots). The process registry ({sms:processes})
// has a slot of its own: it holds every process whatever its accounts.
//
// A few names are built inside Lua from a key the Go side passes, the
// account's prefix ({sms:<account>}:) cut off its end; a reader looking
// for a name finds them here:
//   - receipt.lua, from Owed: msg:<id>, route:<prefix>, skip:<prefix>,
//     dlr:<class>:<unix minute>, resend:<id>;
//   - delivery.lua, from Owed: dlr:<class>:<unix minute>;
//   - finish.lua cuts the prefix and "pid:" off the PID keys it is given,
//     to write the provider ids into the story;
//   - the admission script's pool part, from SenderTATs: tat:sender:<from>.
//
// The package holds no state and never talks to Redis.
package keys

import (
	"strconv"
	"strings"
)

// Account is the key names of one provider account: its hash tag
// {sms:<account>}, the start of every name its methods return.
type Account string

// For returns the key names of account.
func For(account string) Account { return Account("{sms:" + account + "}") }

// Tag is the account's hash tag {sms:<account>}, the slot of all its keys.
func (a Account) Tag() string { return string(a) }

// Prefix is {sms:<account>}:, what every key of the account begins with.
func (a Account) Prefix() string { return string(a) + ":" }

// GlobalTAT holds the account's level's TAT (µs); it expires once the level's tolerance has passed.
func (a Account) GlobalTAT() string { return string(a) + ":tat:global" }

// ClassTAT holds the TAT of class's ceiling; it expires as GlobalTAT does.
func (a Account) ClassTAT(class string) string { return string(a) + ":tat:" + class }

// AfterTAT holds the TAT of the reserve the classes after class share; it expires as GlobalTAT does.
func (a Account) AfterTAT(class string) string { return string(a) + ":tat:after:" + class }

// SenderTATs is the pool's floor and the prefix of each sender's TAT (tat:sender:<from>); each expires as GlobalTAT does.
func (a Account) SenderTATs() string { return string(a) + ":tat:sender:" }

// PoolIndex holds the senders of one interval of the pool hash names, by their TAT; pool.lua renews its lifetime.
func (a Account) PoolIndex(hash, interval string) string {
	return string(a) + ":pool:" + hash + ":" + interval
}

// Wake holds class's wake ticket, when its next waiter should ask; it expires once that instant has passed.
func (a Account) Wake(class string) string { return string(a) + ":wake:" + class }

// Penalty holds the shared pause after a 429, until the pause ends.
func (a Account) Penalty() string { return string(a) + ":penalty" }

// RateOverride holds the operator's rates, for the override's lifetime (or until cleared).
func (a Account) RateOverride() string { return string(a) + ":rate-override" }

// Leases holds the in-flight sends' leases (a sorted set), each until its lease expires.
func (a Account) Leases() string { return string(a) + ":leases" }

// Probe holds the one send allowed to probe after a penalty or while degraded; it lives a second past it.
func (a Account) Probe() string { return string(a) + ":probe" }

// Learned holds the learned rate and its search, kept until reset.
func (a Account) Learned() string { return string(a) + ":learned" }

// Health holds the account's health (the provider's failures and probes), for the health rule's keep.
func (a Account) Health() string { return string(a) + ":health" }

// Record holds id's send-once claim, then its record, for the claim's then the record's lifetime.
func (a Account) Record(id string) string { return string(a) + ":id:" + id }

// Records is the name each Record continues (Record(id) is Records()+":"+id); an admission call taking no claim passes it, its value unused.
func (a Account) Records() string { return string(a) + ":id" }

// Skip holds the skip of the route to prefix while its failures last; Skip("") is never set (a call with no route).
func (a Account) Skip(prefix string) string { return string(a) + ":skip:" + prefix }

// RouteSkipped reports whether key is the Skip of a route (a prefix), not Skip("").
func RouteSkipped(key string) bool { return !strings.HasSuffix(key, ":skip:") }

// Route holds the route to prefix's delivery counts (receipt.lua), for the route rule's window.
func (a Account) Route(prefix string) string { return string(a) + ":route:" + prefix }

// Msg holds id's story (what was sent, and its receipts), for the record's lifetime.
func (a Account) Msg(id string) string { return string(a) + ":msg:" + id }

// PID holds which message and part a provider id is, for the record's lifetime.
func (a Account) PID(providerID string) string { return string(a) + ":pid:" + providerID }

// Resend holds id's resend payload, until its receipt settles it or the resend's lifetime ends.
func (a Account) Resend(id string) string { return string(a) + ":resend:" + id }

// Owed holds the status events owed (a sorted set, by when each is due), kept while any is.
func (a Account) Owed() string { return string(a) + ":owed" }

// Delivery holds class's delivery counts of one unix minute; it lives 10 minutes.
func (a Account) Delivery(class string, minute int64) string {
	return string(a) + ":dlr:" + class + ":" + strconv.FormatInt(minute, 10)
}

// Sent holds the units of class the provider accepted in one unix second; it lives 70 seconds.
func (a Account) Sent(class string, second int64) string {
	return string(a) + ":sent:" + class + ":" + strconv.FormatInt(second, 10)
}

// LegacyProcesses holds the last beats of processes of an older version, which beat under the account; read only now.
func (a Account) LegacyProcesses() string { return string(a) + ":processes" }

// LegacyProcessStates holds those older processes' states; read only now.
func (a Account) LegacyProcessStates() string { return string(a) + ":process-states" }

// IsGlobalTAT reports whether key is an account's GlobalTAT.
func IsGlobalTAT(key string) bool {
	return strings.HasPrefix(key, "{sms:") && strings.HasSuffix(key, "}:tat:global")
}

// Processes holds every process's last beat (a sorted set, µs of Redis's clock), each until it is silent too long.
func Processes() string { return "{sms:processes}" }

// ProcessStates holds every process's state (a hash by process id), pruned with Processes.
func ProcessStates() string { return "{sms:processes}:states" }

// Suppressions is the suppression list's names, under the hash tag
// {sms:suppress} of their own slot: one list for every account.
type Suppressions string

// Suppress returns the suppression list's key names.
func Suppress() Suppressions { return "{sms:suppress}" }

// List holds every suppressed number (a hash: E.164 number → its entry), kept until removed.
func (s Suppressions) List() string { return string(s) + ":list" }

// Log holds the list's changes in order (a stream capped by length), which every process follows.
func (s Suppressions) Log() string { return string(s) + ":log" }

// Inbound marks an inbound message of account handled, by its provider id, for a day: a redelivered webhook is published once.
func (s Suppressions) Inbound(account, id string) string {
	return string(s) + ":inbound:" + account + ":" + id
}

// Refused holds, by a message's id, when the list stopped it and the entry that did (a string), for a week: dispatcher message says it.
func (s Suppressions) Refused(id string) string { return string(s) + ":refused:" + id }

// Seq counts the list's changes; each change's log entry carries its count, so a follower sees a gap.
func (s Suppressions) Seq() string { return string(s) + ":seq" }

// Deferred is the hash tag of class's deferral store, {sms:deferred:<class>}:
// a slot of its own, whatever account will send its messages.
type Deferred string

// DeferredOf returns the deferral store's key names of class.
func DeferredOf(class string) Deferred { return Deferred("{sms:deferred:" + class + "}") }

// Due is the sorted set of the deferred ids by the instant (ms) each is
// due for release; a claimed id's score is its claim's end.
func (d Deferred) Due() string { return string(d) + ":due" }

// Messages is the hash of each deferred id's envelope (its Pub/Sub data,
// attributes, deadline and when it was deferred until).
func (d Deferred) Messages() string { return string(d) + ":msg" }

// Claims is the hash of each id a releaser claimed to the claim's token.
func (d Deferred) Claims() string { return string(d) + ":claim" }

// Forced is the set of the ids an operator released early: sent when
// they come back, whatever their window says, within their cap.
func (d Deferred) Forced() string { return string(d) + ":forced" }

// Trace is the hash of what id's deferral was (when, until when, why)
// and how it ended (released, expired, dropped, and when): dispatcher
// message reads it after the release, until it expires (deferral.TraceKeep
// past its end).
func (d Deferred) Trace(id string) string { return string(d) + ":trace:" + id }

// RecipientSends is the sorted set of the ids of class sent to number in
// its cap's window, by the instant (ms) each took its place; under the
// tag {sms:cap:<class>}, one slot per class.
func RecipientSends(class, number string) string { return "{sms:cap:" + class + "}:" + number }

// Guard is the key names of one class's pumping guard: its hash tag
// {sms:guard:<class>}, the start of every name its methods return. The
// guard counts sends of every account, so its keys live in a slot of
// their own, never in an account's: a script of the guard never takes an
// account's key, nor the admission one of the guard's.
//
// guard's sent.lua builds from Blocks, its prefix {sms:guard:<class>}:
// cut off: rate:<range> (the range's sends in max_per_prefix's window, a
// sorted set), conv:<range> and verified:<range> (min_conversion's sends
// and those verified, by send time), otp:<id> (a sent OTP's range and
// send time, until min_conversion's per); Blocked is built in Go.
type Guard string

// GuardOf returns the key names of class's guard.
func GuardOf(class string) Guard { return Guard("{sms:guard:" + class + "}") }

// Prefix is {sms:guard:<class>}:, what every key of the guard begins with.
func (g Guard) Prefix() string { return string(g) + ":" }

// Blocks holds the class's blocked ranges (a hash: range -> "reason until
// figures"), each field until its block ends; the scripts drop those
// that have ended. Its name is also the channel a new block is published on.
func (g Guard) Blocks() string { return string(g) + ":blocks" }

// OTP holds a sent message's min_conversion range and send time, until
// the rule's per has passed.
func (g Guard) OTP(id string) string { return string(g) + ":otp:" + id }

// Blocked holds why the guard blocked the message id ("reason account
// at_ms"), for a day: what `dispatcher message` tells of it.
func (g Guard) Blocked(id string) string { return string(g) + ":blocked:" + id }
