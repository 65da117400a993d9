//go:build !receiptsmerge

package config

import "smsdispatcher/provider"

// The adapters before they read receipts: the Vonage adapter without a
// signature secret, the generic one without a receipt secret
// (receipts_adapter.go holds the ones that do).

func (a Account) vonageConfig(secret *provider.Secret) provider.VonageConfig {
	return provider.VonageConfig{APIKey: a.VonageAPIKey, APISecret: secret, From: a.VonageFrom, BaseURL: a.VonageAPIURL}
}

func (a Account) receiptOptions() []provider.Option { return nil }

func (p Process) ReceiptOptions(Account) []provider.Option { return nil }
