package credproxy

import (
	"errors"
	"time"

	"github.com/bridged-app/bridged/internal/setting"
)

// Bounds are what the proxy's Limits may be; internal/config applies them
// as it reads BRIDGED_PROXY_MAX_CONNS, ….
var Bounds = struct {
	MaxConns, MaxInFlight    setting.Range[int]
	MaxBody                  setting.Range[int64]
	ReadTimeout, IdleTimeout setting.Range[time.Duration]
}{
	MaxConns:    setting.Range[int]{Min: 4, Max: 10000, Want: "want a whole number from 4 to 10000"},
	MaxInFlight: setting.Range[int]{Min: 1, Max: 10000, Want: "want a whole number from 1 to 10000"},
	MaxBody:     setting.Range[int64]{Min: 64 << 10, Max: 1 << 30, Want: "want a size from 64k to 1g, such as 32m"},
	ReadTimeout: setting.Range[time.Duration]{Min: time.Second, Max: time.Hour, Want: "want a Go duration from 1s to 1h"},
	IdleTimeout: setting.Range[time.Duration]{Min: time.Second, Max: time.Hour, Want: "want a Go duration from 1s to 1h"},
}

// CheckUpstream says why u cannot be Config.Upstream (nil when it can): it
// is http(s)://host[:port][/path], without query, fragment or user info, as
// ParseUpstream (New) takes it.
func CheckUpstream(u string) error {
	if _, err := ParseUpstream(u); err != nil {
		return errors.New("want http(s)://host[:port][/path], without query or user info")
	}
	return nil
}
