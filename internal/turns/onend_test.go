package turns

import "testing"

// New's onEnd hears every end, with its sequence number and time, and may call
// back into the Hub (it runs outside the Hub's lock).
func TestOnEndHearsEveryEnd(t *testing.T) {
	var got []End
	var h *Hub
	h = New(nil, func(e End) {
		got = append(got, e)
		h.Ended(End{}) // no chat: ignored, but must not deadlock
	})
	h.Ended(End{Chat: "local:a", Result: Failed, Upto: 3, Reason: "boom", Attempt: 1, Attempts: 6})
	h.Ended(End{Chat: "local:a", Result: Done, Upto: 3})
	if len(got) != 2 || got[0].Seq != 1 || got[0].Reason != "boom" || got[1].Seq != 2 || got[1].At.IsZero() {
		t.Fatalf("onEnd heard %+v; want both ends with their Seq and At", got)
	}
}
