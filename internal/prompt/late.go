package prompt

import (
	"fmt"
	"time"
)

// LateNotice is the one line a chat gets when n messages reached bridged
// more than window after they were sent (a backlog after a long
// disconnect): they are kept, but a trigger among them starts no turn.
func LateNotice(n int, window time.Duration) string {
	what := fmt.Sprintf("%d messages", n)
	if n == 1 {
		what = "1 message"
	}
	return fmt.Sprintf("Note: I only now received %s sent more than %s ago, so I did not answer them. Send the trigger again and I will read them with it.",
		what, window)
}
