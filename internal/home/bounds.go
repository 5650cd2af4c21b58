package home

import (
	"math"

	"github.com/bridged-app/bridged/internal/setting"
)

// MinFreeBound is what Floor.Min (BRIDGED_MIN_FREE) may be.
var MinFreeBound = setting.Range[int64]{Min: 1 << 20, Max: math.MaxInt64, Want: "want a size of at least 1m, such as 1g"}
