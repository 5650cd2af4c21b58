package approvals

import (
	"time"

	"github.com/bridged-app/bridged/internal/setting"
)

// TimeoutBound is what New's timeout (BRIDGED_APPROVAL_TIMEOUT) may be.
var TimeoutBound = setting.Range[time.Duration]{Min: time.Second, Max: 24 * time.Hour, Want: "want a Go duration from 1s to 24h, such as 10m"}
