package media

import "github.com/bridged-app/bridged/internal/setting"

// MaxBytesBound is what Config.MaxBytes (BRIDGED_MAX_MEDIA_BYTES) may be.
var MaxBytesBound = setting.Range[int64]{Min: 1 << 10, Max: 2 << 30, Want: "want a size from 1k to 2g, such as 20m"}
