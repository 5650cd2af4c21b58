package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/container"
)

// A host that does not resolve is the network's fault, not the
// credential's: doctor says the credential was not tried and names DNS.
func TestDoctorDoesNotBlameCredentialForDNS(t *testing.T) {
	cfg := &config.Config{AnthropicURL: "https://api.bridged-doctor-test.invalid", Secrets: map[string]string{config.EnvAPIKey: "sk-ant-doctor-dns-123456"}}
	c := checkUpstream(context.Background(), cfg, nil)
	if c.status != "FAIL" || strings.Contains(c.hint, "credential") || !strings.Contains(c.detail, "credential was not tried") ||
		!strings.Contains(c.hint, "DNS") {
		t.Errorf("doctor api check for a host that does not resolve: %+v; want a failure naming DNS, not the credential", c)
	}
}

// Doctor names what rootless Podman lacks and the fix for each: an old
// version, a subordinate id range too small for the group uids, cgroups
// that drop the limits (a failure while limits are set, a warning when
// they are 0), and a user that does not linger.
func TestDoctorPodmanChecks(t *testing.T) {
	linger := t.TempDir()
	good := container.EngineInfo{Engine: container.EnginePodman, Version: "4.9.3", Rootless: true, CgroupVersion: "v2",
		CgroupControllers: []string{"cpu", "memory", "pids"},
		UIDMap:            []container.IDMap{{ContainerID: 0, HostID: 1000, Size: 1}, {ContainerID: 1, HostID: 100000, Size: 65536}}}
	limited := &config.Config{ContainerUID: 61000, MemoryBytes: 2 << 30, CPUs: 2, Pids: 512}
	unlimited := &config.Config{ContainerUID: 61000}
	status := func(cs []check) map[string]check {
		m := map[string]check{}
		for _, c := range cs {
			m[c.name] = c
		}
		return m
	}
	got := status(podmanChecks(good, limited, 0, linger))
	for _, n := range []string{"podman", "subuid", "cgroups"} {
		if got[n].status != "ok" {
			t.Errorf("a good Podman: %s %+v; want ok", n, got[n])
		}
	}
	bad := good
	bad.Version = "4.2.0"
	bad.CgroupVersion, bad.CgroupControllers = "v1", nil
	bad.UIDMap = []container.IDMap{{ContainerID: 0, HostID: 1000, Size: 1}, {ContainerID: 1, HostID: 100000, Size: 60000}}
	got = status(podmanChecks(bad, limited, 0, linger))
	for n, want := range map[string]string{"podman": "4.3 or later", "subuid": "usermod --add-subuids", "cgroups": "BRIDGED_CONTAINER_MEMORY=0"} {
		if got[n].status != "FAIL" || !strings.Contains(got[n].hint, want) {
			t.Errorf("%s: %+v; want FAIL naming %q", n, got[n], want)
		}
	}
	if c := status(podmanChecks(bad, unlimited, 0, linger))["cgroups"]; c.status != "warn" {
		t.Errorf("cgroups without limits configured: %+v; want a warning", c)
	}
	if c := podmanInitCheck(filepath.Join(linger, "catatonit")); c.status != "FAIL" || !strings.Contains(c.hint, "apt install catatonit") {
		t.Errorf("no init where Podman looks: %+v; want FAIL naming the package", c)
	}
	if c := podmanInitCheck(os.Args[0]); c.status != "ok" {
		t.Errorf("an init where Podman looks: %+v; want ok", c)
	}
	if c := status(podmanChecks(good, limited, 65534, linger))["linger"]; c.status != "warn" || !strings.Contains(c.hint, "enable-linger nobody") {
		t.Errorf("a user that does not linger: %+v; want a warning naming loginctl enable-linger", c)
	}
}
