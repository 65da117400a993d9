//go:build !receiptsmerge

package server

import (
	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/config"
	"smsdispatcher/dispatch"
)

// The process before it reads receipts (receipts_on.go holds the one
// that does): RECEIPTS_ADDR cannot be served.

func (s *Server) newReceipts(*pubsub.Client) (Receipts, func(), error) {
	if s.cfg.ReceiptsOn() {
		return nil, nil, config.SettingError("RECEIPTS_ADDR", "this build serves no delivery receipts")
	}
	return nil, func() {}, nil
}

func receiptsDispatch(*dispatch.Config, bool) {}
