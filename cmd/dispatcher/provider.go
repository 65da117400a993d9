package main

import (
	"errors"
	"net/http"
	"strings"

	"smsdispatcher/dispatch"
	"smsdispatcher/provider"
)

// newProvider returns the adapter SMS_PROVIDER names, instrumented when tel
// is set, and the credential it reads at each send, which the dispatcher
// reads again every second (a fixed Secret ends an account pause). A
// missing or unusable setting is a *configError naming its variable; no
// error shows a secret.
func newProvider(cfg config, tel *telemetrySet) (provider.Sender, *provider.Secret, error) {
	if err := checkProvider(cfg); err != nil {
		return nil, nil, err
	}
	opts := []provider.Option{provider.WithTimeout(cfg.SendTimeout)}
	if tel != nil {
		opts = append(opts, provider.WithTransportWrapper(func(rt http.RoundTripper) http.RoundTripper {
			return tel.Transport(rt, tel.metrics)
		}))
	}
	switch cfg.Provider {
	case "twilio":
		secret, err := credential(cfg, cfg.TwilioAuthToken, "TWILIO_AUTH_TOKEN")
		if err != nil {
			return nil, nil, err
		}
		t, err := provider.NewTwilio(provider.TwilioConfig{
			AccountSID: cfg.TwilioAccountSID, AuthToken: secret, From: cfg.TwilioFrom,
			MessagingServiceSID: cfg.TwilioServiceSID, BaseURL: cfg.TwilioAPIURL,
		}, opts...)
		if err != nil {
			return nil, nil, adapterError(err, cfg.TwilioAuthTokenFile, map[string]string{
				"AccountSID": "TWILIO_ACCOUNT_SID", "MessagingServiceSID": "TWILIO_MESSAGING_SERVICE_SID",
				"AuthToken": "TWILIO_AUTH_TOKEN", "BaseURL": "TWILIO_API_URL",
			})
		}
		return t, secret, nil
	case "vonage":
		secret, err := credential(cfg, cfg.VonageAPISecret, "VONAGE_API_SECRET")
		if err != nil {
			return nil, nil, err
		}
		v, err := provider.NewVonage(provider.VonageConfig{
			APIKey: cfg.VonageAPIKey, APISecret: secret, From: cfg.VonageFrom, BaseURL: cfg.VonageAPIURL,
		}, opts...)
		if err != nil {
			return nil, nil, adapterError(err, cfg.VonageAPISecretFile, map[string]string{
				"APIKey": "VONAGE_API_KEY", "APISecret": "VONAGE_API_SECRET", "From": "VONAGE_FROM", "BaseURL": "VONAGE_API_URL",
			})
		}
		return v, secret, nil
	}
	secret := provider.StaticSecret(cfg.ProviderToken)
	if s := cfg.fileSecrets["SMS_PROVIDER_TOKEN_FILE"]; s != nil {
		secret = s
	}
	c, err := provider.NewClient(cfg.ProviderURL, "", append(opts, provider.WithTokenSecret(secret))...)
	switch {
	case errors.Is(err, provider.ErrInvalidToken) && cfg.ProviderTokenFile != "":
		return nil, nil, settingError("SMS_PROVIDER_TOKEN_FILE", err.Error())
	case errors.Is(err, provider.ErrInvalidToken):
		return nil, nil, settingError("SMS_PROVIDER_TOKEN", err.Error())
	case err != nil:
		return nil, nil, settingError("SMS_PROVIDER_URL", err.Error())
	}
	return c, secret, nil
}

// checkProvider reports the first setting that SMS_PROVIDER needs and
// cfg lacks.
func checkProvider(cfg config) error {
	need := func(env, value, why string) error {
		if value == "" {
			return settingError(env, why)
		}
		return nil
	}
	var errs []error
	switch cfg.Provider {
	case "twilio":
		errs = []error{
			need("TWILIO_ACCOUNT_SID", cfg.TwilioAccountSID, "required with SMS_PROVIDER=twilio"),
			need("TWILIO_AUTH_TOKEN", cfg.TwilioAuthToken+cfg.TwilioAuthTokenFile, "required with SMS_PROVIDER=twilio (or TWILIO_AUTH_TOKEN_FILE)"),
			need("TWILIO_FROM", cfg.TwilioFrom+cfg.TwilioServiceSID, "set it or TWILIO_MESSAGING_SERVICE_SID with SMS_PROVIDER=twilio"),
		}
	case "vonage":
		errs = []error{
			need("VONAGE_API_KEY", cfg.VonageAPIKey, "required with SMS_PROVIDER=vonage"),
			need("VONAGE_API_SECRET", cfg.VonageAPISecret+cfg.VonageAPISecretFile, "required with SMS_PROVIDER=vonage (or VONAGE_API_SECRET_FILE)"),
			need("VONAGE_FROM", cfg.VonageFrom, "required with SMS_PROVIDER=vonage"),
		}
	default:
		errs = []error{need("SMS_PROVIDER_URL", cfg.ProviderURL, "required to serve (try 'dispatcher demo' for a local run)")}
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
func credential(cfg config, value, env string) (*provider.Secret, error) {
	if s := cfg.fileSecrets[env+"_FILE"]; s != nil {
		return s, nil
	}
	if value == "" {
		return nil, settingError(env, "required (or "+env+"_FILE)")
	}
	return provider.StaticSecret(value), nil
}

// adapterError names the variable behind the adapter's field that err
// names; the credential's is its _FILE variable when it came from one.
func adapterError(err error, secretFile string, envOf map[string]string) error {
	for field, env := range envOf {
		if !strings.Contains(err.Error(), field) {
			continue
		}
		if strings.HasSuffix(env, "_TOKEN") || strings.HasSuffix(env, "_SECRET") {
			if secretFile != "" {
				env += "_FILE"
			}
		}
		return settingError(env, err.Error())
	}
	return err
}

// settingError is a *configError for the variable env.
func settingError(env, msg string) error {
	for _, s := range settings {
		if s.env == env {
			return &configError{env, s.flag, msg}
		}
	}
	panic("settingError: unknown setting " + env)
}

var (
	_ dispatch.Credentials = (*provider.Secret)(nil)
	_ dispatch.Sender      = provider.Sender(nil)
)
