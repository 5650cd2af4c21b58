package control

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// scaleTimes runs f n times (after one run to warm caches) and returns the
// median and the slowest.
func scaleTimes(tb testing.TB, n int, f func() error) (med, most time.Duration) {
	tb.Helper()
	if err := f(); err != nil {
		tb.Fatal(err)
	}
	ds := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := f(); err != nil {
			tb.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)-1]
}

type scaleFigures struct{ metrics, status, why [2]time.Duration }

func scaleRun(b *testing.B, s storetest.Scale) scaleFigures {
	db := storetest.OpenAt(b, storetest.Seeded(b, b.TempDir(), s))
	admin := &Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC}
	srv := &Server{opts: Options{Admin: admin}, log: zerolog.Nop(), started: time.Now()}
	ctx := context.Background()
	// why last needs a message from someone, also in the empty store.
	if _, _, err := db.Messages.Insert(ctx, store.Message{Chat: storetest.Chat(0), ExternalID: "why-" + time.Now().String(), Sender: "alice", Text: "@Andy hello"}); err != nil {
		b.Fatal(err)
	}
	var f scaleFigures
	const n = 20
	f.metrics[0], f.metrics[1] = scaleTimes(b, n, func() error {
		w := httptest.NewRecorder()
		srv.metrics(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if w.Code != http.StatusOK {
			return fmt.Errorf("/metrics: %d %s", w.Code, w.Body)
		}
		return nil
	})
	f.status[0], f.status[1] = scaleTimes(b, n, func() error { _, err := srv.Status(ctx); return err })
	f.why[0], f.why[1] = scaleTimes(b, n, func() error { _, err := admin.Story(ctx, "last", ""); return err })
	return f
}

// BenchmarkScaleCommands: /metrics, `bridged status` and `bridged why last`
// as the control API answers them (its handlers over a real store), on an
// empty store of ten groups and on a store of a million messages (100,000
// replies in one chat) and a thousand groups (BRIDGED_SCALE_MESSAGES makes
// it smaller).
func BenchmarkScaleCommands(b *testing.B) {
	large := storetest.ScaleFromEnv(b)
	for range b.N {
		e, l := scaleRun(b, storetest.Empty), scaleRun(b, large)
		row := func(name string, e, l [2]time.Duration) {
			fmt.Printf("scale: %s, median of 20: empty store %.2f ms, %d messages and %d groups %.2f ms (%.2fx; slowest %.2f ms)\n",
				name, ms(e[0]), large.Messages, large.Groups, ms(l[0]), ms(l[0])/ms(e[0]), ms(l[1]))
		}
		row("GET /metrics", e.metrics, l.metrics)
		row("status", e.status, l.status)
		row("why last", e.why, l.why)
		b.ReportMetric(ms(l.metrics[0]), "ms-metrics-large")
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
