package main

import (
	"context"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/config"
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
