package config

import (
	"errors"
	"strings"
	"time"

	"smsdispatcher/provider"
)

// Sender returns the adapter of a's provider, whose calls take at most
// timeout, and the credential it reads at each send, which the dispatcher
// reads again every second (a fixed Secret ends an account pause). A
// missing or unusable setting is an *Error naming its variable; no error
// shows a secret.
func (a Account) Sender(timeout time.Duration, opts ...provider.Option) (provider.Sender, *provider.Secret, error) {
	s, secret, err := a.sender(timeout, opts...)
	return s, secret, asError(err)
}

func (a Account) sender(timeout time.Duration, opts ...provider.Option) (provider.Sender, *provider.Secret, error) {
	if err := a.checkProvider(variables); err != nil {
		return nil, nil, err
	}
	opts = append([]provider.Option{provider.WithTimeout(timeout)}, opts...)
	switch a.Provider {
	case "twilio":
		secret, err := a.credential(a.TwilioAuthToken, "TWILIO_AUTH_TOKEN")
		if err != nil {
			return nil, nil, err
		}
		t, err := provider.NewTwilio(provider.TwilioConfig{
			AccountSID: a.TwilioAccountSID, AuthToken: secret, From: a.TwilioFrom,
			MessagingServiceSID: a.TwilioServiceSID, BaseURL: a.TwilioAPIURL,
		}, opts...)
		if err != nil {
			return nil, nil, adapterError(err, a.TwilioAuthTokenFile)
		}
		return t, secret, nil
	case "vonage":
		secret, err := a.credential(a.VonageAPISecret, "VONAGE_API_SECRET")
		if err != nil {
			return nil, nil, err
		}
		v, err := provider.NewVonage(a.vonageConfig(secret), opts...)
		if err != nil {
			return nil, nil, adapterError(err, a.VonageAPISecretFile)
		}
		return v, secret, nil
	}
	secret := provider.StaticSecret(a.ProviderToken)
	if s := a.secrets["SMS_PROVIDER_TOKEN_FILE"]; s != nil {
		secret = s
	}
	opts = append(opts, provider.WithTokenSecret(secret))
	c, err := provider.NewClient(a.ProviderURL, "", append(opts, a.receiptOptions()...)...)
	switch {
	case errors.Is(err, provider.ErrInvalidToken) && a.ProviderTokenFile != "":
		return nil, nil, badf("SMS_PROVIDER_TOKEN_FILE", "%s", err.Error())
	case errors.Is(err, provider.ErrInvalidToken):
		return nil, nil, badf("SMS_PROVIDER_TOKEN", "%s", err.Error())
	case err != nil:
		return nil, nil, badf("SMS_PROVIDER_URL", "%s", err.Error())
	}
	return c, secret, nil
}

// CheckProvider reports, as an *Error, the first setting that a's
// provider needs and a lacks.
func (a Account) CheckProvider() error {
	return asError(a.checkProvider(variables))
}

// checkProvider is CheckProvider with the settings named by n.
func (a Account) checkProvider(n names) error {
	need := func(env, value, why string) error {
		if value == "" {
			return badf(env, "%s", why)
		}
		return nil
	}
	with := func(provider string) string { return n("SMS_PROVIDER") + "=" + provider }
	var errs []error
	switch a.Provider {
	case "twilio":
		errs = []error{
			need("TWILIO_ACCOUNT_SID", a.TwilioAccountSID, "required with "+with("twilio")),
			need("TWILIO_AUTH_TOKEN", a.TwilioAuthToken+a.TwilioAuthTokenFile, "required with "+with("twilio")+" (or "+n("TWILIO_AUTH_TOKEN_FILE")+")"),
			need("TWILIO_FROM", a.TwilioFrom+a.TwilioServiceSID, "set it or "+n("TWILIO_MESSAGING_SERVICE_SID")+" with "+with("twilio")),
		}
	case "vonage":
		errs = []error{
			need("VONAGE_API_KEY", a.VonageAPIKey, "required with "+with("vonage")),
			need("VONAGE_API_SECRET", a.VonageAPISecret+a.VonageAPISecretFile, "required with "+with("vonage")+" (or "+n("VONAGE_API_SECRET_FILE")+")"),
			need("VONAGE_FROM", a.VonageFrom, "required with "+with("vonage")),
		}
	default:
		errs = []error{need("SMS_PROVIDER_URL", a.ProviderURL, "required to serve (try 'dispatcher demo' for a local run)")}
	}
	for _, err := range errs {
		if err != nil {
			return err // one line, the first variable
		}
	}
	return nil
}

// credential returns the secret given in the variable env, or the one
// read at start from the file env + "_FILE" (readFiles).
func (a Account) credential(value, env string) (*provider.Secret, error) {
	if s := a.secrets[env+"_FILE"]; s != nil {
		return s, nil
	}
	if value == "" {
		return nil, badf(env, "required (or %s_FILE)", env)
	}
	return provider.StaticSecret(value), nil
}

// adapterError names the setting behind the adapter's field that err
// names (the rows' field); the credential's is its _FILE variable when
// it came from one.
func adapterError(err error, secretFile string) error {
	for _, s := range settings {
		if s.field == "" || !strings.Contains(err.Error(), s.field) {
			continue
		}
		env := s.env
		if s.secret && secretFile != "" {
			env += "_FILE"
		}
		return badf(env, "%s", err.Error())
	}
	return err
}
