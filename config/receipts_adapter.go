package config

import "smsdispatcher/provider"

// vonageConfig is the Vonage adapter's configuration of a, its API secret
// secret: with the signature secret its receipts are verified with.
func (a Account) vonageConfig(secret *provider.Secret) provider.VonageConfig {
	return provider.VonageConfig{
		APIKey: a.VonageAPIKey, APISecret: secret, From: a.VonageFrom, BaseURL: a.VonageAPIURL,
		SignatureSecret: a.SignatureSecret(), SignatureMethod: a.VonageSignatureMethod,
	}
}

// receiptOptions are the generic adapter's options for a's receipts: the
// secret they are verified with, when given.
func (a Account) receiptOptions() []provider.Option {
	if s := a.ReceiptSecret(); s != nil {
		return []provider.Option{provider.WithReceiptSecret(s)}
	}
	return nil
}

// ReceiptOptions are the adapter options of account a under p: with
// receipts on, the URL each send asks the provider to post its receipts
// to.
func (p Process) ReceiptOptions(a Account) []provider.Option {
	if !p.ReceiptsOn() {
		return nil
	}
	return []provider.Option{provider.WithStatusCallback(p.ReceiptsURL(a.Name))}
}
