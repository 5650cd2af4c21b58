package rules

import (
	"strings"

	"github.com/bridged-app/bridged/internal/store"
)

// mountSyntax is how an extra mount is written.
const mountSyntax = "HOST[:CONTAINER][:ro|rw]"

// ParseMount reads an extra mount as written on the command line:
// HOST[:CONTAINER][:ro|rw]. HOST is a host directory (absolute or starting
// with ~), CONTAINER the name it gets under /workspace/extra (default: the
// directory's name), and the mode is read-only unless rw is given. Only the
// shape is checked here: whether the directory may be mounted, and how, is
// the mount allowlist's decision.
func ParseMount(spec string) (store.MountRequest, error) {
	spec = strings.TrimSpace(spec)
	parts := strings.Split(spec, ":")
	var m store.MountRequest
	if n := len(parts); n > 1 {
		switch parts[n-1] {
		case "rw":
			m.ReadWrite = true
			parts = parts[:n-1]
		case "ro":
			parts = parts[:n-1]
		}
	}
	switch len(parts) {
	case 1:
		m.HostPath = parts[0]
	case 2:
		m.HostPath, m.ContainerPath = parts[0], parts[1]
		if m.ContainerPath == "" {
			return store.MountRequest{}, invalid("mount %q: the container name after the colon is empty; want %s", spec, mountSyntax)
		}
	default:
		return store.MountRequest{}, invalid("mount %q: want %s (a host path with a colon cannot be mounted)", spec, mountSyntax)
	}
	if err := checkMountShape(m); err != nil {
		return store.MountRequest{}, err
	}
	return m, nil
}

// FormatMount writes m as ParseMount reads it, with its mode always given.
func FormatMount(m store.MountRequest) string {
	s := m.HostPath
	if m.ContainerPath != "" {
		s += ":" + m.ContainerPath
	}
	if m.ReadWrite {
		return s + ":rw"
	}
	return s + ":ro"
}

// checkMountShape checks what this package knows of a mount: a host path is
// given, and neither part holds control characters.
func checkMountShape(m store.MountRequest) error {
	switch {
	case strings.TrimSpace(m.HostPath) == "":
		return invalid("mount %q: no host directory; want %s", FormatMount(m), mountSyntax)
	case hasControl(m.HostPath) || hasControl(m.ContainerPath):
		return invalid("mount %q must not contain control characters", FormatMount(m))
	}
	return nil
}
