package ipchost

import (
	"math"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/setting"
)

// Bounds are what the IPC host's limits (Config.MaxTasks, MaxTaskPrompt,
// Files) may be; internal/config applies them as it reads BRIDGED_MAX_TASKS,
// ….
var Bounds = struct {
	MaxTasks, FilesPerMinute   setting.Range[int]
	MaxTaskPrompt, BytesPerDay setting.Range[int64]
}{
	MaxTasks:       setting.Range[int]{Min: 1, Max: 10000, Want: "want a whole number from 1 to 10000"},
	FilesPerMinute: setting.Range[int]{Min: 1, Max: 100000, Want: "want a whole number from 1 to 100000"},
	// A task prompt crosses the IPC boundary, whose cap on any text is
	// ipc.MaxTextBytes.
	MaxTaskPrompt: setting.Range[int64]{Min: 256, Max: ipc.MaxTextBytes, Want: "want a size from 256 to 64k, such as 16k"},
	BytesPerDay:   setting.Range[int64]{Min: 1 << 20, Max: math.MaxInt64, Want: "want a size of at least 1m, such as 2g"},
}
