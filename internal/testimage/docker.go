package testimage

import (
	"context"
	"fmt"
	"os"
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
