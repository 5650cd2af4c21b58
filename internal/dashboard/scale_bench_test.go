package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// scaleRequests is how many requests of each page scalePages times.
const scaleRequests = 50

// processCPU is the CPU time the process used so far (every thread's: the
// server's and the client's), apart from how loaded the machine is.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scalePages times the overview and the first group's page (its chat has
// the most history) on a store seeded to s: the median of scaleRequests,
// the slowest and the process's CPU per request (the server's work and the
// client's), after one request of each.
func scalePages(b *testing.B, s storetest.Scale) (overview, group [3]time.Duration) {
	db := storetest.OpenAt(b, storetest.Seeded(b, b.TempDir(), s))
	admin := &control.Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC}
	d, err := New(Options{Source: fakeSource{admin}, Admin: admin, PollEvery: time.Hour, Now: time.Now})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { _ = d.Run(ctx); close(runDone) }()
	srv := httptest.NewServer(d)
	defer func() { cancel(); <-runDone; srv.Close() }()
	l, err := d.Login()
	if err != nil {
		b.Fatal(err)
	}
	resp, err := noRedirect().Get(srv.URL + l.Path)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			cookie = c
		}
	}
	if cookie == nil {
		b.Fatal("login set no session cookie")
	}
	get := func(path string) error {
		req, err := http.NewRequest(http.MethodGet, srv.URL+d.prefix+path, nil)
		if err != nil {
			return err
		}
		req.AddCookie(cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
		}
		return nil
	}
	times := func(path string) (out [3]time.Duration) {
		if err := get(path); err != nil {
			b.Fatal(err)
		}
		var ds []time.Duration
		c0 := processCPU(b)
		for range scaleRequests {
			t0 := time.Now()
			if err := get(path); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
		}
		cpu := (processCPU(b) - c0) / scaleRequests
		slices.Sort(ds)
		return [3]time.Duration{ds[len(ds)/2], ds[len(ds)-1], cpu}
	}
	return times(""), times("groups/" + string(storetest.Folder(0)))
}

// BenchmarkScalePages: the dashboard's overview and a group page (the
// chat with 100,000 replies) on an empty store of ten groups and on a store
// of a million messages and a thousand groups (BRIDGED_SCALE_MESSAGES makes
// it smaller).
func BenchmarkScalePages(b *testing.B) {
	large := storetest.ScaleFromEnv(b)
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for range b.N {
		eo, eg := scalePages(b, storetest.Empty)
		lo, lg := scalePages(b, large)
		for _, r := range []struct {
			name string
			e, l [3]time.Duration
		}{{"dashboard overview", eo, lo}, {"dashboard group page", eg, lg}} {
			fmt.Printf("scale: %s, median of %d: empty store %.2f ms, %d messages and %d groups %.2f ms (%.2fx; slowest %.2f ms); CPU per request (server and client; apart from the machine's load) %.2f ms against %.2f ms (%.2fx)\n",
				r.name, scaleRequests, msf(r.e[0]), large.Messages, large.Groups, msf(r.l[0]), msf(r.l[0])/msf(r.e[0]), msf(r.l[1]),
				msf(r.l[2]), msf(r.e[2]), msf(r.l[2])/msf(r.e[2]))
		}
		b.ReportMetric(msf(lo[0]), "ms-overview-large")
		b.ReportMetric(msf(lg[0]), "ms-group-large")
		b.ReportMetric(msf(lo[2]), "ms-cpu-overview-large")
		b.ReportMetric(msf(lg[2]), "ms-cpu-group-large")
	}
}
