package testimage

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestDockerSkipReason(t *testing.T) {
	up := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("connection refused") }
	tests := []struct {
		name       string
		ci, skip   string
		ping       func(context.Context) error
		wantSkip   string
		wantErr    bool
		wantPinged bool
	}{
		{name: "daemon answers", ping: up, wantPinged: true},
		{name: "no daemon, locally", ping: down, wantSkip: "no Docker daemon answers", wantPinged: true},
		{name: "no daemon, in CI", ci: "true", ping: down, wantErr: true, wantPinged: true},
		{name: "asked to skip", skip: "1", ping: up, wantSkip: "BRIDGED_SKIP_DOCKER"},
		{name: "asked to skip, in CI", ci: "true", skip: "1", ping: up, wantPinged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			t.Setenv("BRIDGED_SKIP_DOCKER", tt.skip)
			pinged := false
			skip, err := DockerSkipReason(context.Background(), func(ctx context.Context) error { pinged = true; return tt.ping(ctx) })
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v; want error %v", err, tt.wantErr)
			}
			if tt.wantSkip == "" && skip != "" || !strings.Contains(skip, tt.wantSkip) {
				t.Fatalf("skip = %q; want %q", skip, tt.wantSkip)
			}
			if pinged != tt.wantPinged {
				t.Fatalf("pinged = %v; want %v", pinged, tt.wantPinged)
			}
		})
	}
}

// A Podman test skips with the reason and the way to start the service, or
// fails under CI=true.
func TestPodmanSkipReason(t *testing.T) {
	down := func(context.Context) error { return errors.New("connection refused") }
	t.Setenv("BRIDGED_SKIP_DOCKER", "")
	t.Setenv("BRIDGED_SKIP_PODMAN", "")
	t.Setenv("CI", "")
	skip, err := PodmanSkipReason(context.Background(), "unix:///nowhere.sock", down)
	if err != nil || !strings.Contains(skip, "no rootless Podman answers") || !strings.Contains(skip, ".ci/podman.sh") {
		t.Errorf("skip %q, err %v; want the reason and .ci/podman.sh", skip, err)
	}
	if skip, err := PodmanSkipReason(context.Background(), "", down); err != nil || !strings.Contains(skip, PodmanUser) {
		t.Errorf("no host: skip %q, err %v; want it to name the missing user", skip, err)
	}
	t.Setenv("CI", "true")
	if _, err := PodmanSkipReason(context.Background(), "unix:///nowhere.sock", down); err == nil {
		t.Error("under CI=true a missing Podman skipped; want an error")
	}
}
