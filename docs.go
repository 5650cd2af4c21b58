// Package bridged carries the documents the bridged binary installs beside
// itself: `bridged install-service` writes the README where the unit's
// Documentation= link points.
package bridged

import _ "embed"

// README is the README.md of this version.
//
//go:embed README.md
var README string
