package prompt

import (
	"testing"
	"time"
)

func TestLateNotice(t *testing.T) {
	tests := []struct {
		window time.Duration
		want   string
	}{
		{10 * time.Minute, "Note: I only now received messages sent more than 10 minutes ago, so I did not answer them. Send the trigger again and I will read them with it."},
		{time.Hour, "Note: I only now received messages sent more than 1 hour ago, so I did not answer them. Send the trigger again and I will read them with it."},
		{90 * time.Second, "Note: I only now received messages sent more than 1m30s ago, so I did not answer them. Send the trigger again and I will read them with it."},
	}
	for _, tt := range tests {
		if got := LateNotice(tt.window); got != tt.want {
			t.Errorf("LateNotice(%s) = %q; want %q", tt.window, got, tt.want)
		}
	}
}
