package main

import (
	"syscall"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/credproxy"
)

// fdBase is what the daemon holds besides the proxy's connections: the
// database, the WhatsApp connection, the control socket and its clients,
// Docker API streams, run logs and IPC watches, with room to spare.
const (
	fdBase         = 256
	fdPerContainer = 16
)

// proxyLimits is the credential proxy's share of the configuration.
func proxyLimits(cfg *config.Config) credproxy.Limits {
	return credproxy.Limits{
		MaxConns:    cfg.ProxyMaxConns,
		MaxInFlight: cfg.ProxyMaxInFlight,
		MaxBody:     cfg.ProxyMaxBody,
		ReadTimeout: cfg.ProxyReadTimeout,
		IdleTimeout: cfg.ProxyIdleTimeout,
	}
}

// fdBound is the most descriptors the daemon holds with every container
// running and each of their proxy sockets at its caps (docs/security.md).
func fdBound(cfg *config.Config) int {
	return fdBase + cfg.MaxContainers*fdPerContainer + proxyLimits(cfg).FDBound(cfg.MaxContainers)
}

// checkFDLimit compares the bound with the daemon's open-file limit (the Go
// runtime has already raised the soft limit to the hard one) and warns when
// the limit is lower: then a flood could still reach it.
func checkFDLimit(cfg *config.Config, log zerolog.Logger) {
	bound := fdBound(cfg)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn().Err(err).Msg("cannot read the open-file limit")
		return
	}
	if lim.Cur < uint64(bound) {
		log.Warn().Uint64("fd_limit", lim.Cur).Int("fd_bound", bound).
			Msg("the daemon's open-file limit is below what its containers may make it hold: raise it (LimitNOFILE= in the unit, ulimit -n) or lower BRIDGED_MAX_CONTAINERS, BRIDGED_PROXY_MAX_CONNS or BRIDGED_PROXY_MAX_INFLIGHT")
		return
	}
	log.Debug().Uint64("fd_limit", lim.Cur).Int("fd_bound", bound).Msg("open-file limit checked")
}
