package whatsapp

import (
	"regexp"
	"runtime/debug"
	"time"
)

// LibraryModule is the module the channel speaks WhatsApp's protocol with.
const LibraryModule = "go.mau.fi/whatsmeow"

// LibraryMaxAge is the age of the whatsmeow version built into bridged
// past which `bridged doctor` warns: WhatsApp refuses clients whose
// protocol falls behind (405 "client outdated"), and whatsmeow follows it
// in new versions.
const LibraryMaxAge = 60 * 24 * time.Hour

// Library is the whatsmeow version bridged was built with.
type Library struct {
	Version string    // the module version, e.g. v0.0.0-20260821141805-33cfac511629
	Date    time.Time // its commit time (from the pseudo-version), zero when unknown
}

// BuiltLibrary returns the whatsmeow version in this binary's build info;
// ok is false when the binary carries none.
func BuiltLibrary() (lib Library, ok bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Library{}, false
	}
	return libraryIn(bi)
}

func libraryIn(bi *debug.BuildInfo) (Library, bool) {
	for _, m := range bi.Deps {
		if m.Path != LibraryModule {
			continue
		}
		if m.Replace != nil && m.Replace.Version != "" {
			m = m.Replace
		}
		date, _ := PseudoVersionTime(m.Version)
		return Library{Version: m.Version, Date: date}, true
	}
	return Library{}, false
}

// pseudoTime is a pseudo-version's timestamp: vX.0.0-yyyymmddhhmmss-hash,
// vX.Y.Z-pre.0.yyyymmddhhmmss-hash or vX.Y.Z-0.yyyymmddhhmmss-hash.
var pseudoTime = regexp.MustCompile(`[-.](\d{14})-[0-9a-f]{12}(\+incompatible)?$`)

// PseudoVersionTime returns the commit time a Go pseudo-version carries;
// ok is false for a tagged version.
func PseudoVersionTime(v string) (t time.Time, ok bool) {
	m := pseudoTime.FindStringSubmatch(v)
	if m == nil {
		return time.Time{}, false
	}
	t, err := time.Parse("20060102150405", m[1])
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}
