package main

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/bridged-app/bridged/internal/channel/whatsapp"
)

// checkWhatsmeow shows the whatsmeow version bridged was built with and
// its age when the binary was built (built, from the binary's vcs.time:
// a new build of the same sources is no fresher, and the clock of the day
// doctor runs says nothing of the library), and warns when it is older
// than whatsapp.LibraryMaxAge: WhatsApp refuses clients that fall behind
// its protocol. Without a build time, the age is measured to now.
func checkWhatsmeow(lib whatsapp.Library, found bool, built, now time.Time) check {
	const name = "whatsmeow"
	if !found {
		return check{name: name, status: "warn", detail: "this binary carries no module versions (built without modules?)",
			hint: "build bridged with `make build` to see which whatsmeow it uses"}
	}
	if lib.Date.IsZero() {
		return check{name: name, status: "ok", detail: lib.Version + " (release date unknown)"}
	}
	to, when := built, "when this binary was built ("+built.UTC().Format("2006-01-02")+")"
	if built.IsZero() {
		to, when = now, "today (this binary's build time is unknown)"
	}
	age := to.Sub(lib.Date)
	days := int(age.Hours() / 24)
	detail := fmt.Sprintf("%s, from %s: %d days old %s", lib.Version, lib.Date.Format("2006-01-02"), days, when)
	if age > whatsapp.LibraryMaxAge {
		return check{name: name, status: "warn", detail: detail,
			hint: fmt.Sprintf("older than %d days: WhatsApp refuses stale clients (405 client outdated); update bridged", int(whatsapp.LibraryMaxAge.Hours()/24))}
	}
	return check{name: name, status: "ok", detail: detail}
}

// buildTime is the commit time of the sources this binary was built from
// (vcs.time), zero when the build did not record it.
func buildTime() time.Time {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return time.Time{}
	}
	return buildTimeIn(bi)
}

func buildTimeIn(bi *debug.BuildInfo) time.Time {
	for _, s := range bi.Settings {
		if s.Key == "vcs.time" {
			t, err := time.Parse(time.RFC3339, s.Value)
			if err == nil {
				return t
			}
		}
	}
	return time.Time{}
}
