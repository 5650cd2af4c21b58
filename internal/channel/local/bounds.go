package local

import (
	"math"

	"github.com/bridged-app/bridged/internal/setting"
)

// Bounds are what KeepLimits may be; internal/config applies them as it
// reads BRIDGED_LOCAL_FILES and BRIDGED_LOCAL_FILES_BYTES.
var Bounds = struct {
	Files setting.Range[int]
	Bytes setting.Range[int64]
}{
	Files: setting.Range[int]{Min: 1, Max: 1000000, Want: "want a whole number from 1 to 1000000"},
	Bytes: setting.Range[int64]{Min: 1 << 20, Max: math.MaxInt64, Want: "want a size of at least 1m, such as 2g"},
}
