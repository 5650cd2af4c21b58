package retention

import (
	"math"
	"time"

	"github.com/bridged-app/bridged/internal/setting"
)

// KeepBound is what the Pruner's Keep, LogKeep and InboxKeep may be: 0
// keeps forever; else at least two days, so today's usage (cost today, in
// any timezone) is never folded away.
var KeepBound = setting.Range[time.Duration]{Min: 48 * time.Hour, Max: math.MaxInt64, ZeroOff: true, Want: "want 0 (keep forever) or at least 2d"}
