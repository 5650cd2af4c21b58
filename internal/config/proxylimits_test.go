package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestProxyAndContainerFileLimits(t *testing.T) {
	dir := t.TempDir()
	c, err := resolve(t, []string{"--home", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.ProxyMaxConns != 64 || c.ProxyMaxInFlight != 32 || c.ProxyMaxBody != 32<<20 ||
		c.ProxyReadTimeout != time.Minute || c.ProxyIdleTimeout != 2*time.Minute || c.ContainerNoFile != 4096 {
		t.Errorf("defaults: conns %d, in flight %d, body %d, read %s, idle %s, nofile %d; want 64, 32, 32m, 1m, 2m, 4096",
			c.ProxyMaxConns, c.ProxyMaxInFlight, c.ProxyMaxBody, c.ProxyReadTimeout, c.ProxyIdleTimeout, c.ContainerNoFile)
	}
	c, err = resolve(t, []string{"--home", dir, "--proxy-max-conns", "16"}, map[string]string{
		"BRIDGED_PROXY_MAX_INFLIGHT": "4", "BRIDGED_PROXY_MAX_BODY": "1m", "BRIDGED_PROXY_READ_TIMEOUT": "5s",
		"BRIDGED_PROXY_IDLE_TIMEOUT": "30s", "BRIDGED_CONTAINER_NOFILE": "1024",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.ProxyMaxConns != 16 || c.ProxyMaxInFlight != 4 || c.ProxyMaxBody != 1<<20 ||
		c.ProxyReadTimeout != 5*time.Second || c.ProxyIdleTimeout != 30*time.Second || c.ContainerNoFile != 1024 {
		t.Errorf("set: %+v", c)
	}
	v := c.Values()
	for env, want := range map[string]string{
		"BRIDGED_PROXY_MAX_CONNS": "16", "BRIDGED_PROXY_MAX_INFLIGHT": "4", "BRIDGED_PROXY_MAX_BODY": "1048576",
		"BRIDGED_PROXY_READ_TIMEOUT": "5s", "BRIDGED_PROXY_IDLE_TIMEOUT": "30s", "BRIDGED_CONTAINER_NOFILE": "1024",
	} {
		if v[env] != want {
			t.Errorf("bridged config shows %s=%q; want %q", env, v[env], want)
		}
	}
	for env, bad := range map[string][]string{
		"BRIDGED_PROXY_MAX_CONNS":    {"0", "3", "many", "10001"},
		"BRIDGED_PROXY_MAX_INFLIGHT": {"0", "-1", "x"},
		"BRIDGED_PROXY_MAX_BODY":     {"0", "1k", "2g", "big"},
		"BRIDGED_PROXY_READ_TIMEOUT": {"0", "10ms", "2h", "soon"},
		"BRIDGED_PROXY_IDLE_TIMEOUT": {"0", "500ms", "forever"},
		"BRIDGED_CONTAINER_NOFILE":   {"0", "64", "unlimited", "2000000"},
	} {
		for _, v := range bad {
			if _, err := resolve(t, []string{"--home", dir}, map[string]string{env: v}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), env) {
				t.Errorf("%s=%q: err = %v; want invalid %s", env, v, err, env)
			}
		}
	}
}
