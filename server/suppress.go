package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/ledger"
	"smsdispatcher/provider"
	"smsdispatcher/receipts"
	"smsdispatcher/suppress"
)

// StatusSuppressed is the status event of a message the suppression list
// stopped, or its provider refused for the recipient's opt-out
// (docs/contract.md): the receipts' fold names it alike.
const StatusSuppressed = ledger.StatusSuppressed

// listLoadBound bounds the load of the suppression list at start, before
// the lanes pull: a million numbers load in a few seconds; a Redis that
// does not answer lets the process start on an empty list, which it
// loads as soon as Redis answers.
const listLoadBound = 30 * time.Second

// publishBound bounds a status event's or a change's publish.
const publishBound = 10 * time.Second

// suppressions is the dispatcher's suppression list (dispatch.Suppressions):
// the copy it keeps in memory, the Store its own changes go to, mirrored
// to SUPPRESSIONS_TOPIC, and the status topic its refusals are told on.
type suppressions struct {
	inbound *pubsub.Publisher // INBOUND_TOPIC's
	list    *suppress.List
	store   *suppress.Store
	mirror  *suppress.TopicMirror
	status  *pubsub.Publisher
	changed func(source, action, account string) // counts a change; nil: not counted
	// suppressed counts a message a receipt settled suppressed, by class
	// and source; nil: not counted.
	suppressed func(class, source string)
	// counted counts an inbound reply by account, keyword and outcome
	// (telemetry's Inbound); nil: not counted.
	counted func(account, keyword, outcome string)
	// keywords are each account's words of the inbound replies; an
	// account not in it reads the defaults.
	keywords map[string]suppress.Keywords
	logger   *slog.Logger
}

func (s *suppressions) Suppressed(number string) (string, bool) { return s.list.Suppressed(number) }

// OptedOut puts number on the list, source provider: in this process's
// copy at once (even when Redis failed), in Redis for every process, and
// on the mirror's topic.
func (s *suppressions) OptedOut(ctx context.Context, number, account string) error {
	ctx = suppress.Batch(ctx) // its publish, not another request's, decides its answer
	e := suppress.Entry{Number: number, Action: suppress.ActionAdd, Source: suppress.SourceProvider, Account: account,
		Reason: "the provider refused it: the recipient opted out of the sender", At: time.Now()}
	s.list.Apply(e)
	changed, err := s.store.Add(ctx, e)
	if err != nil {
		return err
	}
	if changed && s.changed != nil {
		s.changed(suppress.SourceProvider, suppress.ActionAdd, account)
	}
	// Waited for even when the list held the number already: the
	// provider's retry of a receipt answered 503 for a failed publish
	// publishes it again (the mirror is at least once).
	pctx, cancel := context.WithTimeout(ctx, publishBound)
	defer cancel()
	return s.mirror.Wait(pctx)
}

// SettledSuppressed records that the message id of class, settled
// suppressed by a receipt saying number opted out (Vonage's err-code 9),
// was stopped by number's entry, as a message the list stops is
// (recordRefusal: dispatcher message says when and by which change), and
// counts it in sms_suppressed_total as a 21610 is counted.
func (s *suppressions) SettledSuppressed(ctx context.Context, id, class, number string) {
	if s.suppressed != nil {
		s.suppressed(class, suppress.SourceProvider)
	}
	s.recordRefusal(ctx, id, number, suppress.SourceProvider)
}

// newSuppressions is s's suppression list, on s's Redis, mirrored to
// SUPPRESSIONS_TOPIC; its changes are counted when s has metrics.
func (s *Server) newSuppressions(rdb redis.Cmdable, ps *pubsub.Client) *suppressions {
	mirror := &suppress.TopicMirror{Publisher: ps.Publisher(s.cfg.SuppressionsTopic)}
	store := suppress.NewStore(rdb, "", mirror)
	l := &suppressions{list: suppress.NewList(store, s.logger), store: store, mirror: mirror, status: s.status, logger: s.logger,
		inbound: ps.Publisher(s.cfg.InboundTopic), keywords: accountKeywords(s.accounts)}
	if s.opts.Telemetry != nil {
		l.changed = s.opts.Telemetry.Metrics.SuppressionChange
		l.suppressed = s.opts.Telemetry.Metrics.Suppressed
		l.counted = s.opts.Telemetry.Metrics.Inbound
	}
	return l
}

// accountKeywords are the words of the inbound replies by account: the
// lists the account sets, the defaults for the others.
func accountKeywords(accounts []Account) map[string]suppress.Keywords {
	m := make(map[string]suppress.Keywords, len(accounts))
	for _, a := range accounts {
		own := suppress.Keywords{OptOut: a.Setup.OptOutKeywords, OptIn: a.Setup.OptInKeywords, Help: a.Setup.HelpKeywords}
		m[a.Setup.Name] = own.Or(suppress.DefaultKeywords)
	}
	return m
}

// loadList loads the suppression list before the lanes pull, bounded by
// listLoadBound: a process that could not load it starts on what it has
// (nothing), and Run loads it once Redis answers.
func (s *Server) loadList(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, listLoadBound)
	defer cancel()
	if err := s.list.list.Load(lctx); err != nil && ctx.Err() == nil {
		s.logger.Error("could not load the suppression list; starting without it until Redis answers", "err", err)
	}
}

// stopPublishers flushes and stops the status and the mirror's
// publishers.
func (s *Server) stopPublishers() {
	s.status.Stop()
	s.list.mirror.Publisher.Stop()
	s.list.inbound.Stop()
}

// Refused records which change stopped id (dispatcher message) and
// publishes its status event suppressed, waiting for Pub/Sub's answer
// (bounded): the message is acked already, and a lost record or event is
// logged, never retried. The record costs Redis two calls, for a stopped
// message only.
func (s *suppressions) Refused(ctx context.Context, id, number string, class admission.Class, account, source string) {
	s.recordRefusal(ctx, id, number, source)
	data, _ := json.Marshal(receipts.StatusEvent{ // strings only: it cannot fail
		ID: id, Status: StatusSuppressed, Account: account, Class: class.String(),
		StatusAt: time.Now().UTC().Format(receipts.TimeLayout), Source: source,
	})
	pctx, cancel := context.WithTimeout(ctx, publishBound)
	defer cancel()
	_, err := s.status.Publish(pctx, &pubsub.Message{Data: data, Attributes: map[string]string{
		receipts.AttrID: id, receipts.AttrClass: class.String(), receipts.AttrStatus: StatusSuppressed,
	}}).Get(pctx)
	if err != nil {
		s.logger.Warn("could not publish a suppressed message's status event", "id", id, "class", class, "err", err)
	}
}

// recordRefusal records that the list stopped id, by its number's entry
// (the entry as Redis holds it; this process's source when Redis has it
// no more).
func (s *suppressions) recordRefusal(ctx context.Context, id, number, source string) {
	at := time.Now()
	e, ok, err := s.store.Get(ctx, number)
	if err == nil && !ok {
		e = suppress.Entry{Number: number, Source: source}
	}
	if err == nil {
		err = s.store.Refused(ctx, id, at, e)
	}
	if err != nil {
		s.logger.Warn("could not record which change stopped a message", "id", id, "err", err)
	}
}

// inboundEvent is an inbound message on INBOUND_TOPIC (docs/contract.md
// section 7).
type inboundEvent struct {
	ID         string `json:"id"`
	Account    string `json:"account"`
	From       string `json:"from"`
	To         string `json:"to"`
	Body       string `json:"body"`
	Keyword    string `json:"keyword"`
	ReceivedAt string `json:"received_at"`
}

// Inbound takes a verified inbound message of account (receipts'
// InboundHandler): a STOP puts its sender on the list, a START takes it
// off, through account, source inbound; then the message is published to
// INBOUND_TOPIC, once per provider id (a delivery whose handling failed
// is forgotten, and the provider's retry handles it again).
func (s *suppressions) Inbound(ctx context.Context, account string, in provider.Inbound) error {
	kw, outcome, err := s.inbound1(ctx, account, in)
	if s.counted != nil {
		s.counted(account, kw, outcome)
	}
	return err
}

// The outcomes of an inbound reply, sms_inbound_total's outcome; a post
// refused before it was read counts as the receipts' forged, malformed
// or too_large (Unread).
const (
	inboundChanged   = "changed"   // the list changed
	inboundUnchanged = "unchanged" // no keyword, no change, or a sender that is no E.164 number
	inboundDuplicate = "duplicate" // a webhook posted again: handled already
	inboundFailed    = "failed"    // answered 503: the provider posts it again
)

// Unread counts an inbound post to account refused before it was read
// (receipts' InboundHandler): its keyword is none, since its body was
// never read.
func (s *suppressions) Unread(account, outcome string) {
	if s.counted != nil {
		s.counted(account, suppress.KeywordNone, outcome)
	}
}

// inbound1 handles in and says its keyword and outcome.
func (s *suppressions) inbound1(ctx context.Context, account string, in provider.Inbound) (kw, outcome string, err error) {
	kw = s.keywordOf(account, in)
	first, err := s.store.FirstInbound(ctx, account, in.ID)
	if err != nil {
		return kw, inboundFailed, err
	}
	if !first {
		return kw, inboundDuplicate, nil
	}
	changed, err := s.inboundOnce(ctx, account, kw, in)
	if err != nil {
		if ferr := s.store.ForgetInbound(context.WithoutCancel(ctx), account, in.ID); ferr != nil {
			err = fmt.Errorf("%w; and forgetting it: %v", err, ferr)
		}
		return kw, inboundFailed, err
	}
	if changed {
		return kw, inboundChanged, nil
	}
	return kw, inboundUnchanged, nil
}

// keywordOf is what in says by account's words.
func (s *suppressions) keywordOf(account string, in provider.Inbound) string {
	words, ok := s.keywords[account]
	if !ok {
		words = suppress.DefaultKeywords
	}
	return words.Keyword(in.Body, in.OptOutType)
}

func (s *suppressions) inboundOnce(ctx context.Context, account, kw string, in provider.Inbound) (changed bool, err error) {
	ctx = suppress.Batch(ctx) // its publish, not another request's, decides its answer
	if kw == suppress.KeywordStop || kw == suppress.KeywordStart {
		if _, err := suppress.Key(in.From); err == nil {
			e := suppress.Entry{Number: in.From, Source: suppress.SourceInbound, Account: account, Reason: "replied " + strings.ToUpper(kw), At: time.Now()}
			change, action := s.store.Add, suppress.ActionAdd
			if kw == suppress.KeywordStart {
				change, action = s.store.Remove, suppress.ActionRemove
			}
			if changed, err = change(ctx, e); err != nil {
				return false, err
			}
			e.Action = action
			s.list.Apply(e)
			if changed && s.changed != nil {
				s.changed(suppress.SourceInbound, action, account)
			}
			if err := s.mirror.Wait(ctx); err != nil {
				return false, err
			}
		}
	}
	data, _ := json.Marshal(inboundEvent{ID: in.ID, Account: account, From: in.From, To: in.To, Body: in.Body, Keyword: kw,
		ReceivedAt: time.Now().UTC().Format(time.RFC3339)}) // strings only: it cannot fail
	_, err = s.inbound.Publish(ctx, &pubsub.Message{Data: data, Attributes: map[string]string{"account": account, "keyword": kw}}).Get(ctx)
	return changed, err
}
