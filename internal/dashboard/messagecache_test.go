package dashboard

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// The overview's messages per hour, kept in memory and added to from the
// messages stored since: what the store counts, a message stored late with
// an older time in its hour, hours that leave the last 24 out.
func TestMessagesByHourKeepsCounts(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Hour).Add(30 * time.Minute)
	*f.clock = now
	n := 0
	add := func(at time.Time, bot bool) {
		t.Helper()
		n++
		if _, _, err := f.db.Messages.Insert(ctx, store.Message{Chat: "local:fam", ExternalID: fmt.Sprint("h", n), Sender: "a", Text: "hi", SentAt: at, IsBot: bot}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(since time.Time) []store.HourlyMessages {
		t.Helper()
		got, err := f.d.messagesByHour(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.db.Messages.ByHour(ctx, "", since)
		if err != nil {
			t.Fatal(err)
		}
		eq := func(a, b store.HourlyMessages) bool { return a.Hour.Equal(b.Hour) && a.In == b.In && a.Out == b.Out }
		if !slices.EqualFunc(got, want, eq) {
			t.Fatalf("messagesByHour(%s) = %v; the store says %v", since.Format(time.RFC3339), got, want)
		}
		return got
	}
	since := now.Truncate(time.Hour).Add(-23 * time.Hour)
	add(now.Add(-20*time.Hour), false)
	add(now.Add(-5*time.Hour), true)
	add(now.Add(-25*time.Hour), false) // before the plot
	check(since)
	add(now.Add(-5*time.Hour), false) // stored late, hours old
	add(now.Add(-time.Minute), true)
	if got := check(since); len(got) != 3 {
		t.Fatalf("%d hours; want 3", len(got))
	}
	// Five hours on: the hour 20 hours back leaves the plot.
	*f.clock = now.Add(5 * time.Hour)
	add(now.Add(5*time.Hour), false)
	if got := check(since.Add(5 * time.Hour)); len(got) != 3 || !got[0].Hour.Equal(now.Add(-5*time.Hour).Truncate(time.Hour)) {
		t.Fatalf("hours five hours on = %v; want the three from 5 hours back", got)
	}
}
