package status

import (
	"context"
	"fmt"

	"smsdispatcher/ledger"
)

// ReadMessage reads the story of the message id on every account of
// setups, in their order; a Message that is not Found when none holds any.
func ReadMessage(ctx context.Context, setups []Setup, id string) (Message, error) {
	m := Message{ID: id, Accounts: []MessageStory{}}
	for _, s := range setups {
		st, ok, err := s.Limiter.Ledger().Story(ctx, id)
		if err != nil {
			return Message{}, fmt.Errorf("account %s: %w", s.Name, err)
		}
		if !ok {
			continue
		}
		resend := false
		if st.Record == "" {
			// A resend's record is its own: the story is the message's.
			rs, found, err := s.Limiter.Ledger().Story(ctx, ledger.ResendID(id))
			if err != nil {
				return Message{}, fmt.Errorf("account %s: %w", s.Name, err)
			}
			if found && rs.Record != "" {
				st.Record, st.Attempts, resend = rs.Record, rs.Attempts, true
			}
		}
		account := st.Account
		if account == "" {
			account = s.Name
		}
		m.Accounts = append(m.Accounts, MessageStory{
			Account: account, Record: st.Record, Attempts: st.Attempts, Class: st.Class, Sender: st.Sender,
			ProviderIDs: append([]string{}, st.ProviderIDs...), SentAt: stamp(st.SentAt),
			Status: st.Status, ErrorCode: st.ErrorCode, StatusAt: stamp(st.StatusAt), Parts: st.Parts,
			Owed: st.Owed, Resent: st.Resent, Resend: resend,
		})
	}
	return m, nil
}
