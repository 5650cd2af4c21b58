package testimage

import (
	"context"
	"fmt"
	"os"
	"os/user"
)

// DockerSkipReason decides whether a test that needs Docker runs. It returns
// "" when ping succeeds, and a reason to skip when BRIDGED_SKIP_DOCKER is set
// or no daemon answers. Under CI=true skipping is not allowed: there a missing
// daemon is an error, and BRIDGED_SKIP_DOCKER is ignored.
func DockerSkipReason(ctx context.Context, ping func(context.Context) error) (string, error) {
	ci := os.Getenv("CI") == "true"
	if os.Getenv("BRIDGED_SKIP_DOCKER") != "" && !ci {
		return "BRIDGED_SKIP_DOCKER is set", nil
	}
	if err := ping(ctx); err != nil {
		if ci {
			return "", fmt.Errorf("under CI=true Docker is required, but no Docker daemon answers: %w", err)
		}
		return fmt.Sprintf("no Docker daemon answers (%v); start Docker, or set CI=true to make this a failure", err), nil
	}
	return "", nil
}

// PodmanHost is where the tests find a rootless Podman API service:
// BRIDGED_PODMAN_HOST, else the socket .ci/podman.sh starts for its user
// bridged-podman (/run/user/<its uid>/podman/podman.sock), else "".
func PodmanHost() string {
	if h := os.Getenv("BRIDGED_PODMAN_HOST"); h != "" {
		return h
	}
	u, err := user.Lookup(PodmanUser)
	if err != nil {
		return ""
	}
	return "unix:///run/user/" + u.Uid + "/podman/podman.sock"
}

// PodmanUser is the scratch user .ci/podman.sh runs rootless Podman as.
const PodmanUser = "bridged-podman"

// PodmanSkipReason is DockerSkipReason for the rootless Podman service at
// host (PodmanHost): "" when ping succeeds, else why the test skips — with
// BRIDGED_SKIP_DOCKER or BRIDGED_SKIP_PODMAN set, or no service answering
// and how to start one. Under CI=true a missing service is an error.
func PodmanSkipReason(ctx context.Context, host string, ping func(context.Context) error) (string, error) {
	ci := os.Getenv("CI") == "true"
	if !ci {
		for _, v := range []string{"BRIDGED_SKIP_DOCKER", "BRIDGED_SKIP_PODMAN"} {
			if os.Getenv(v) != "" {
				return v + " is set", nil
			}
		}
	}
	var err error
	if host == "" {
		err = fmt.Errorf("no user %s and no BRIDGED_PODMAN_HOST", PodmanUser)
	} else {
		err = ping(ctx)
	}
	if err != nil {
		if ci {
			return "", fmt.Errorf("under CI=true rootless Podman is required, but none answers at %q: %w (.ci/podman.sh starts it)", host, err)
		}
		return fmt.Sprintf("no rootless Podman answers at %q (%v); run .ci/podman.sh as root to start one, or set BRIDGED_PODMAN_HOST; CI=true makes this a failure", host, err), nil
	}
	return "", nil
}
