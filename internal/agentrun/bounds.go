package agentrun

import (
	"fmt"
	"math"
	"time"

	"github.com/bridged-app/bridged/internal/setting"
)

// Bounds are what the run settings may be (the router passes them to
// agentrun and groupqueue); internal/config applies them as it reads
// BRIDGED_MAX_CONTAINERS, BRIDGED_IDLE_TIMEOUT, ….
var Bounds = struct {
	MaxContainers, TaskMaxFailures       setting.Range[int]
	IdleTimeout, RetryBase, StartTimeout setting.Range[time.Duration]
}{
	MaxContainers:   setting.Range[int]{Min: 1, Max: 1000, Want: "want a whole number from 1 to 1000"},
	TaskMaxFailures: setting.Range[int]{Min: 1, Max: 1000, Want: "want a whole number from 1 to 1000"},
	IdleTimeout:     setting.Range[time.Duration]{Min: time.Second, Max: math.MaxInt64, Want: "want a Go duration of at least 1s, such as 30m"},
	RetryBase:       setting.Range[time.Duration]{Min: 10 * time.Millisecond, Max: time.Hour, Want: "want a Go duration from 10ms to 1h"},
	StartTimeout:    setting.Range[time.Duration]{Min: time.Second, Max: time.Hour, Want: "want a Go duration from 1s to 1h"},
}

// DefaultContainerTimeout is the hard timeout of a container that prints
// nothing, unless the idle timeout and TimeoutMargin are longer.
const DefaultContainerTimeout = 30 * time.Minute

// ContainerTimeoutFor is the hard timeout when none is set:
// DefaultContainerTimeout, or the idle timeout and TimeoutMargin when that
// is longer (an idle container is closed before it is stopped as silent).
func ContainerTimeoutFor(idle time.Duration) time.Duration {
	return max(DefaultContainerTimeout, idle+TimeoutMargin)
}

// CheckContainerTimeout says why hard cannot be the hard timeout beside
// the idle timeout idle (nil when it can).
func CheckContainerTimeout(idle, hard time.Duration) error {
	if minHard := idle + TimeoutMargin; hard < minHard {
		return fmt.Errorf("must be at least the idle timeout + 30s (%s)", minHard)
	}
	return nil
}
