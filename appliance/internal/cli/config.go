package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Config is cairnctl's client configuration file (JSON, mode 0600), found
// without flags at $CAIRNCTL_CONFIG, else $HOME/.config/cairn/cairnctl.json:
//
//	{"url": "https://127.0.0.1:8443", "ca_file": "/path/cert.pem",
//	 "token": "...", "username": "admin", "password_file": "..."}
//
// With username and password_file set, cairnctl logs in again by itself when
// the token has expired. `cairnctl login` writes it. url may list several
// gateways of one system, comma separated ("https://a:8443,https://b:8443",
// with ca_file holding all their certificates): cairnctl asks the next one
// when the one in use cannot be reached.
type Config struct {
	URL          string `json:"url,omitempty"`
	CAFile       string `json:"ca_file,omitempty"`
	Token        string `json:"token,omitempty"`
	Username     string `json:"username,omitempty"`
	PasswordFile string `json:"password_file,omitempty"`
}

// DefaultURL is used when neither --url nor the config gives one.
const DefaultURL = "https://127.0.0.1:8443"

// ConfigPath returns where the config lives for this environment.
func ConfigPath(getenv func(string) string, flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if p := getenv("CAIRNCTL_CONFIG"); p != "" {
		return p, nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("cannot find the config file: HOME is not set; set CAIRNCTL_CONFIG or pass --config")
	}
	return filepath.Join(home, ".config", "cairn", "cairnctl.json"), nil
}

// loadConfig reads the config; a missing file is an empty config.
func loadConfig(path string) (*Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("config %s is not valid JSON (%v); fix it or run `cairnctl login` to rewrite it", path, err)
	}
	return &c, nil
}

// saveConfig writes the config atomically with mode 0600 (it holds a token).
func saveConfig(path string, c *Config) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create config directory: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cairnctl-*.json")
	if err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err == nil {
		_, err = tmp.Write(append(b, '\n'))
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	return nil
}

// setup loads the config and builds the API client; flags override the file.
func (s *session) setup() error {
	if s.api != nil {
		return nil
	}
	path, err := ConfigPath(s.env.Getenv, s.opts.config)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return err
	}
	s.cfg, s.cfgPath = cfg, path
	url := cfg.URL
	if s.opts.url != "" {
		url = s.opts.url
	}
	if url == "" {
		url = DefaultURL
	}
	ca := cfg.CAFile
	if s.opts.caFile != "" {
		ca = s.opts.caFile
	}
	s.api, err = newClient(url, ca, s)
	return err
}
