package config

import (
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"strings"

	"smsdispatcher/provider"
)

// readRedisURLFile reads REDIS_URL_FILE into RedisURL, before validate
// checks the URL. Its errors name the variable, never the file's content.
func (p *Process) readRedisURLFile() error {
	if p.RedisURLFile == "" {
		return nil
	}
	if p.RedisURL != "" {
		return SettingError("REDIS_URL_FILE", "set either it or REDIS_URL, not both")
	}
	b, err := readSmall(p.RedisURLFile)
	if err != nil {
		return SettingError("REDIS_URL_FILE", err.Error())
	}
	if p.RedisURL = strings.TrimSpace(string(b)); p.RedisURL == "" {
		return SettingError("REDIS_URL_FILE", p.RedisURLFile+": empty")
	}
	return nil
}

// redisURLVariable is the variable RedisURL came from, for its errors.
func (p Process) redisURLVariable() string {
	if p.RedisURLFile != "" {
		return "REDIS_URL_FILE"
	}
	return "REDIS_URL"
}

// readFiles reads the token and CA files that s names. Its errors name the
// variable and never hold a file's content.
func (s *Settings) readFiles() error {
	if err := s.Account.readFiles(); err != nil {
		return asError(err)
	}
	if s.RedisCAFile != "" {
		b, err := readSmall(s.RedisCAFile)
		if err != nil {
			return SettingError("REDIS_CA_FILE", err.Error())
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return SettingError("REDIS_CA_FILE", "no PEM certificate in the file")
		}
		s.RedisCA = b
	}
	return nil
}

// readFiles reads a's credential files; its errors are problems of the
// _FILE variable.
func (a *Account) readFiles() error {
	// Files written by echo or an editor end with a newline, which
	// provider.FileSecret trims; a Secret mounted by Kubernetes holds the
	// bytes as they were given. The adapter reads the file again when it
	// changes (Sender).
	a.secrets = map[string]*provider.Secret{}
	for _, f := range []struct{ env, path string }{
		{"SMS_PROVIDER_TOKEN_FILE", a.ProviderTokenFile},
		{"TWILIO_AUTH_TOKEN_FILE", a.TwilioAuthTokenFile},
		{"VONAGE_API_SECRET_FILE", a.VonageAPISecretFile},
		{"VONAGE_SIGNATURE_SECRET_FILE", a.VonageSignatureSecretFile},
		{"SMS_RECEIPT_SECRET_FILE", a.ReceiptSecretFile},
	} {
		if f.path == "" {
			continue
		}
		s, err := provider.FileSecret(f.path)
		if err != nil {
			return badf(f.env, "%s", err.Error())
		}
		a.secrets[f.env] = s
	}
	if s := a.secrets["SMS_PROVIDER_TOKEN_FILE"]; s != nil {
		a.ProviderToken = s.Value()
	}
	return nil
}

// readSmall reads a file of at most maxFileSize bytes. Its errors say what
// went wrong with the path (os errors name it), never what the file holds.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxFileSize)
	}
	return b, nil
}

// ForgetFiles clears a's credential files and what was read of them, for
// credentials given in their place (the demo's simulator).
func (a *Account) ForgetFiles() {
	a.ProviderTokenFile, a.TwilioAuthTokenFile, a.VonageAPISecretFile, a.secrets = "", "", "", nil
	a.VonageSignatureSecretFile, a.ReceiptSecretFile = "", ""
}
