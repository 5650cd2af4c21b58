package router

import (
	"fmt"
	"math"
	"time"

	"github.com/bridged-app/bridged/internal/setting"
)

// Bounds are what the router's settings (Config) may be; internal/config
// applies them as it reads BRIDGED_MAX_CONTAINERS, BRIDGED_IDLE_TIMEOUT, ….
var Bounds = struct {
	MaxContainers, PromptCap, TaskMaxFailures        setting.Range[int]
	IdleTimeout, LateWindow, RetryBase, StartTimeout setting.Range[time.Duration]
}{
	MaxContainers:   setting.Range[int]{Min: 1, Max: 1000, Want: "want a whole number from 1 to 1000"},
	PromptCap:       setting.Range[int]{Min: 1, Max: 10000, Want: "want a whole number from 1 to 10000"},
	TaskMaxFailures: setting.Range[int]{Min: 1, Max: 1000, Want: "want a whole number from 1 to 1000"},
	IdleTimeout:     setting.Range[time.Duration]{Min: time.Second, Max: math.MaxInt64, Want: "want a Go duration of at least 1s, such as 30m"},
	LateWindow:      setting.Range[time.Duration]{Min: time.Minute, Max: 7 * 24 * time.Hour, Want: "want a Go duration from 1m to 168h"},
	RetryBase:       setting.Range[time.Duration]{Min: 10 * time.Millisecond, Max: time.Hour, Want: "want a Go duration from 10ms to 1h"},
	StartTimeout:    setting.Range[time.Duration]{Min: time.Second, Max: time.Hour, Want: "want a Go duration from 1s to 1h"},
}

// containerTimeoutMargin is how much longer than the idle timeout the
// hard timeout is at least: an idle container is closed before it is
// stopped as silent.
const containerTimeoutMargin = 30 * time.Second

// ContainerTimeoutFor is the hard timeout when none is set:
// DefaultContainerTimeout, or the idle timeout and its margin when that is
// longer.
func ContainerTimeoutFor(idle time.Duration) time.Duration {
	return max(DefaultContainerTimeout, idle+containerTimeoutMargin)
}

// CheckContainerTimeout says why hard cannot be the hard timeout beside
// the idle timeout idle (nil when it can).
func CheckContainerTimeout(idle, hard time.Duration) error {
	if minHard := idle + containerTimeoutMargin; hard < minHard {
		return fmt.Errorf("must be at least the idle timeout + 30s (%s)", minHard)
	}
	return nil
}
