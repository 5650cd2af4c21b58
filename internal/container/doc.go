// Package container starts and stops agent containers.
//
// Runtime is the interface the rest of the daemon uses; Docker implements it
// over the Engine API (github.com/moby/moby/client), never the docker CLI.
// The package also builds the mount list of DESIGN §7, checks extra mounts
// against the mount allowlist of DESIGN §11, and creates a group's
// .claude/settings.json before its first run.
package container
