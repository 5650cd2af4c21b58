package prompt

import (
	"fmt"
	"time"
)

// LateNotice is the one line a chat gets when messages reached bridged
// more than window after they were sent (a backlog after a long
// disconnect, which arrives one message at a time): they are kept, but a
// trigger among them starts no turn.
func LateNotice(window time.Duration) string {
	return fmt.Sprintf("Note: I only now received messages sent more than %s ago, so I did not answer them. Send the trigger again and I will read them with it.",
		spell(window))
}

// spell says a duration the way people do: "10 minutes", "1 hour".
func spell(d time.Duration) string {
	unit, n := "minute", int64(d/time.Minute)
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		unit, n = "hour", int64(d/time.Hour)
	case d%time.Minute != 0:
		return d.String()
	}
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
