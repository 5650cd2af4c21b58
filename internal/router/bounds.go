package router

import (
	"time"

	"github.com/bridged-app/bridged/internal/setting"
)

// Bounds are what the router's own settings (Config.PromptCap, LateWindow)
// may be; internal/config applies them. The run settings' are agentrun.Bounds.
var Bounds = struct {
	PromptCap  setting.Range[int]
	LateWindow setting.Range[time.Duration]
}{
	PromptCap:  setting.Range[int]{Min: 1, Max: 10000, Want: "want a whole number from 1 to 10000"},
	LateWindow: setting.Range[time.Duration]{Min: time.Minute, Max: 7 * 24 * time.Hour, Want: "want a Go duration from 1m to 168h"},
}
