package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// scalePages times the overview and the first group's page (its chat has
// the most history) on a store seeded to s: the median of 20 and the
// slowest, after one request of each.
func scalePages(b *testing.B, s storetest.Scale) (overview, group [2]time.Duration) {
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
	times := func(path string) (out [2]time.Duration) {
		if err := get(path); err != nil {
			b.Fatal(err)
		}
		var ds []time.Duration
		for range 20 {
			t0 := time.Now()
			if err := get(path); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
		}
		slices.Sort(ds)
		return [2]time.Duration{ds[len(ds)/2], ds[len(ds)-1]}
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
			e, l [2]time.Duration
		}{{"dashboard overview", eo, lo}, {"dashboard group page", eg, lg}} {
			fmt.Printf("scale: %s, median of 20: empty store %.2f ms, %d messages and %d groups %.2f ms (%.2fx; slowest %.2f ms)\n",
				r.name, msf(r.e[0]), large.Messages, large.Groups, msf(r.l[0]), msf(r.l[0])/msf(r.e[0]), msf(r.l[1]))
		}
		b.ReportMetric(msf(lo[0]), "ms-overview-large")
		b.ReportMetric(msf(lg[0]), "ms-group-large")
	}
}
