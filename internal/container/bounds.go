package container

import (
	"errors"
	"math"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/setting"
)

// Bounds are what the containers' settings (Limits, DockerOptions, the
// uid and gid) may be; internal/config applies them as it reads
// BRIDGED_CONTAINER_MEMORY, BRIDGED_ENGINE_TIMEOUT, ….
var Bounds = struct {
	MemoryBytes, Pids, NoFile, ID setting.Range[int64]
	CPUs                          setting.Range[float64]
	EngineTimeout                 setting.Range[time.Duration]
}{
	MemoryBytes:   setting.Range[int64]{Min: 64 << 20, Max: math.MaxInt64, ZeroOff: true, Want: "want a size such as 512m or 2g, or 0 (below 64m the agent cannot run)"},
	Pids:          setting.Range[int64]{Min: 16, Max: math.MaxInt64, ZeroOff: true, Want: "want 0 (no limit) or at least 16"},
	NoFile:        setting.Range[int64]{Min: 256, Max: 1 << 20, Want: "want a whole number from 256 to 1048576"},
	ID:            setting.Range[int64]{Min: 1, Max: 1<<31 - 1, Want: "want a whole number from 1 to 2147483647 (never 0: an agent never runs as root)"},
	CPUs:          setting.Range[float64]{Min: 0, Max: 1024, Want: "want a number of CPUs such as 1.5, or 0"},
	EngineTimeout: setting.Range[time.Duration]{Min: 100 * time.Millisecond, Max: time.Hour, Want: "want a Go duration from 100ms to 1h"},
}

// CheckImage says why ref is no image reference (nil when it is one).
func CheckImage(ref string) error {
	if strings.TrimSpace(ref) == "" || strings.ContainsAny(ref, " \t\n") {
		return errors.New("want an image reference such as bridged-agent:latest")
	}
	return nil
}

// CheckNetwork says why mode is no network mode a container may have: bridge,
// or none (no network; the agent still reaches Claude through the proxy
// socket).
func CheckNetwork(mode string) error {
	switch mode {
	case "bridge", "none":
		return nil
	}
	return errors.New("want bridge or none")
}
