package main

import (
	"fmt"
	"time"

	"github.com/bridged-app/bridged/internal/channel/whatsapp"
)

// checkWhatsmeow shows the whatsmeow version bridged was built with and
// its age, and warns when it is older than whatsapp.LibraryMaxAge:
// WhatsApp refuses clients that fall behind its protocol.
func checkWhatsmeow(lib whatsapp.Library, found bool, now time.Time) check {
	const name = "whatsmeow"
	if !found {
		return check{name: name, status: "warn", detail: "this binary carries no module versions (built without modules?)",
			hint: "build bridged with `make build` to see which whatsmeow it uses"}
	}
	if lib.Date.IsZero() {
		return check{name: name, status: "ok", detail: lib.Version + " (release date unknown)"}
	}
	age := now.Sub(lib.Date)
	days := int(age.Hours() / 24)
	detail := fmt.Sprintf("%s, from %s (%d days old)", lib.Version, lib.Date.Format("2006-01-02"), days)
	if age > whatsapp.LibraryMaxAge {
		return check{name: name, status: "warn", detail: detail,
			hint: fmt.Sprintf("older than %d days: WhatsApp refuses stale clients (405 client outdated); update bridged", int(whatsapp.LibraryMaxAge.Hours()/24))}
	}
	return check{name: name, status: "ok", detail: detail}
}
