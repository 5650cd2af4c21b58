package transcribe

import (
	"errors"
	"net/url"
	"strings"
)

// CheckURL says why u cannot be Client.URL (nil when it can): the base URL
// of the endpoint, http(s)://host[:port][/path], without query, fragment or
// user info (the key is Client.Key).
func CheckURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.RawQuery != "" || p.Fragment != "" || p.User != nil {
		return errors.New("want http(s)://host[:port][/path], without query or user info (the key goes in BRIDGED_TRANSCRIBE_KEY)")
	}
	return nil
}

// CheckModel says why model cannot be Client.Model (nil when it can).
func CheckModel(model string) error {
	if strings.TrimSpace(model) == "" {
		return errors.New("must not be empty")
	}
	return nil
}
