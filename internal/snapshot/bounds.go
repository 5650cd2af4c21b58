package snapshot

import "github.com/bridged-app/bridged/internal/setting"

// MaxFileBound is what Config.MaxFile (BRIDGED_SNAPSHOT_MAX_FILE) may be.
var MaxFileBound = setting.Range[int64]{Min: 1 << 10, Max: 1 << 30, Want: "want a size from 1k to 1g, such as 16m"}
