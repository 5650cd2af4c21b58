package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/bridged-app/bridged/internal/container"
)

// openKube connects to the cluster (in-cluster, else KUBECONFIG), checks
// that the daemon may use Pods in the agents' namespace, and finds its own
// Pod (BRIDGED_KUBE_POD): the owner of the agents' Pods and the address of
// the proxy for them. Each group's agent runs as a uid of its own (the
// group's runAsUser and runAsGroup, decision records 33 and 43): a root
// daemon gives its directories away, one that is not (the manifests') grants
// them by ACL, which the claim's file system must take; where it does not,
// every agent runs as the daemon's uid, as said at start. Extra mounts are
// host paths, which a cluster does not have: none.
func (d *daemon) openKube(ctx context.Context) error {
	cfg := d.cfg
	rc, err := container.KubeConfig("")
	if err != nil {
		return err
	}
	ns := cfg.KubeNamespace
	if ns == "" {
		ns = container.InClusterNamespace()
	}
	if ns == "" {
		return fmt.Errorf("kubernetes engine: no namespace (set BRIDGED_KUBE_NAMESPACE outside a cluster)")
	}
	pods, err := container.KubePods(rc, ns)
	if err != nil {
		return err
	}
	opts := container.KubeOptions{
		Namespace: ns, Claim: cfg.KubeClaim, HomeDir: d.hm.Layout().Dir, CallTimeout: cfg.EngineTimeout,
		Proxy: kubeProxy{d},
	}
	if cfg.KubePod != "" {
		if opts.Owner, d.kubeIP, err = container.KubeSelf(ctx, pods, cfg.KubePod); err != nil {
			return err
		}
	}
	k, err := container.NewKubernetes(d.log, pods, rc, opts)
	if err != nil {
		return err
	}
	d.onRelease(func() { k.Close() })
	if err := k.Ping(ctx); err != nil {
		return fmt.Errorf("kubernetes engine: %w (the daemon's RBAC must allow Pods in %s: docs/kubernetes.md)", err, ns)
	}
	if err := d.openGroupUIDs(); err != nil {
		return err
	}
	d.kube, d.runtime = k, k
	d.engine = container.EngineInfo{Engine: container.EngineKubernetes}
	d.log.Info().Str("namespace", ns).Str("claim", cfg.KubeClaim).Str("pod", cfg.KubePod).Msg("agents run as Pods (kubernetes engine)")
	return nil
}

// listenProxyTCP serves the credential proxy over TCP for the kubernetes
// engine's Pods (decision record 36), and their IPC on the same channel
// (the IPC host's, decision record 42); nothing on the other engines.
func (d *daemon) listenProxyTCP() error {
	if d.kube == nil {
		return nil
	}
	_, port, err := net.SplitHostPort(d.cfg.ProxyListen)
	if err != nil {
		return fmt.Errorf("BRIDGED_PROXY_LISTEN: %w", err)
	}
	host := d.kubeIP
	if host == "" {
		if host, err = os.Hostname(); err != nil {
			return err
		}
	}
	t, err := d.proxy.ListenTCP(d.cfg.ProxyListen, net.JoinHostPort(host, port), d.host.Channel)
	if err != nil {
		return err
	}
	d.proxyTCP = t
	d.onRelease(func() { t.Close() })
	return nil
}

// kubeProxy is the proxy's TCP channel, opened in a later phase than the
// engine.
type kubeProxy struct{ d *daemon }

func (p kubeProxy) OpenTCP(group, name string) (string, func(), error) {
	if p.d.proxyTCP == nil {
		return "", nil, fmt.Errorf("the credential proxy does not listen over TCP")
	}
	return p.d.proxyTCP.OpenTCP(group, name)
}

func (p kubeProxy) Addr() string { return p.d.proxyTCP.Addr() }
