package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/container"
)

// kubeVerbs are what the daemon does with Pods in its namespace: the
// Role of docs/kubernetes.md.
var kubeVerbs = []struct{ verb, sub string }{
	{"create", ""}, {"get", ""}, {"list", ""}, {"watch", ""}, {"delete", ""}, {"create", "attach"},
}

const kubeRoleHint = "apply the Role and RoleBinding of docs/kubernetes.md to the daemon's service account"

// checkKube checks the cluster of the kubernetes engine from where doctor
// runs (in the daemon's Pod: its service account; else KUBECONFIG): the
// API server answers, the namespace exists, the daemon may handle Pods
// and attach to them there, the claim of the home exists, and whether
// each group can have a uid of its own. Each failure names its fix.
func checkKube(ctx context.Context, cfg *config.Config) []check {
	rc, err := container.KubeConfig("")
	if err != nil {
		return []check{{name: "kubernetes", status: "FAIL", detail: err.Error(),
			hint: "run doctor in the daemon's Pod (kubectl -n bridged exec deploy/bridged -- /bridged doctor), or point KUBECONFIG at the cluster"}}
	}
	ns := cfg.KubeNamespace
	if ns == "" {
		ns = container.InClusterNamespace()
	}
	if ns == "" {
		return []check{{name: "kubernetes", status: "FAIL", detail: "no namespace for the agents' Pods", hint: "set BRIDGED_KUBE_NAMESPACE (in a cluster, the daemon's own is used)"}}
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return []check{{name: "kubernetes", status: "FAIL", detail: err.Error(), hint: "fix the kubeconfig's certificates"}}
	}
	api := kubeAPI{host: strings.TrimRight(rc.Host, "/"), c: hc}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var version struct {
		GitVersion string `json:"gitVersion"`
	}
	if code, err := api.do(cctx, "GET", "/version", nil, &version); err != nil || code != http.StatusOK {
		return []check{{name: "kubernetes", status: "FAIL", detail: fmt.Sprintf("the API server at %s does not answer: %s", api.host, kubeErr(code, err)),
			hint: "check the cluster's address and the credentials of the kubeconfig (or the daemon Pod's service account)"}}
	}
	out := []check{{name: "kubernetes", status: "ok", detail: fmt.Sprintf("the API server at %s answers (%s)", api.host, version.GitVersion)}}
	out = append(out, kubeNamespaceCheck(cctx, api, ns), kubeRBACCheck(cctx, api, ns), kubeClaimCheck(cctx, api, ns, cfg.KubeClaim))
	return append(out, groupUIDCheck(cfg, os.Geteuid()))
}

func kubeNamespaceCheck(ctx context.Context, api kubeAPI, ns string) check {
	code, err := api.do(ctx, "GET", "/api/v1/namespaces/"+url.PathEscape(ns), nil, nil)
	switch {
	case err == nil && code == http.StatusOK:
		return check{name: "namespace", status: "ok", detail: ns + " exists"}
	case err == nil && code == http.StatusNotFound:
		return check{name: "namespace", status: "FAIL", detail: ns + " does not exist", hint: "create it with docs/kubernetes.md's manifests (kubectl create namespace " + ns + "), or set BRIDGED_KUBE_NAMESPACE"}
	case err == nil && code == http.StatusForbidden:
		// The Role of docs/kubernetes.md covers the namespace's Pods and
		// claim only: the claim's check tells whether it exists.
		return check{name: "namespace", status: "ok", detail: ns + ": not readable by the daemon (its Role is the namespace's own); the claim is looked up there below"}
	}
	return check{name: "namespace", status: "FAIL", detail: "get namespace " + ns + ": " + kubeErr(code, err), hint: "check the API server and the daemon's credentials"}
}

// kubeRBACCheck asks the API server whether the daemon may do each of
// kubeVerbs (a SelfSubjectAccessReview, which every authenticated user may
// make); where that cannot be asked, it lists the Pods.
func kubeRBACCheck(ctx context.Context, api kubeAPI, ns string) check {
	var missing []string
	for _, v := range kubeVerbs {
		review := map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
			"spec": map[string]any{"resourceAttributes": map[string]string{"namespace": ns, "verb": v.verb, "resource": "pods", "subresource": v.sub}}}
		var res struct {
			Status struct {
				Allowed bool   `json:"allowed"`
				Reason  string `json:"reason"`
			} `json:"status"`
		}
		code, err := api.do(ctx, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review, &res)
		if err != nil || code/100 != 2 {
			return kubeListCheck(ctx, api, ns, kubeErr(code, err))
		}
		if !res.Status.Allowed {
			name := "pods"
			if v.sub != "" {
				name += "/" + v.sub
			}
			missing = append(missing, v.verb+" "+name)
		}
	}
	if len(missing) > 0 {
		return check{name: "rbac", status: "FAIL", detail: "the daemon may not " + strings.Join(missing, ", ") + " in " + ns, hint: kubeRoleHint}
	}
	return check{name: "rbac", status: "ok", detail: "the daemon may create, watch, delete and attach to Pods in " + ns}
}

func kubeListCheck(ctx context.Context, api kubeAPI, ns, why string) check {
	code, err := api.do(ctx, "GET", "/api/v1/namespaces/"+url.PathEscape(ns)+"/pods?limit=1", nil, nil)
	if err == nil && code == http.StatusOK {
		return check{name: "rbac", status: "warn", detail: "the daemon may list Pods in " + ns + "; its other rights were not asked (" + why + ")", hint: kubeRoleHint}
	}
	return check{name: "rbac", status: "FAIL", detail: "list Pods in " + ns + ": " + kubeErr(code, err), hint: kubeRoleHint}
}

func kubeClaimCheck(ctx context.Context, api kubeAPI, ns, claim string) check {
	if claim == "" {
		return check{name: "claim", status: "FAIL", detail: "BRIDGED_KUBE_CLAIM is not set", hint: "set it to the PersistentVolumeClaim the home is on (docs/kubernetes.md)"}
	}
	var pvc struct {
		Status struct {
			Phase string `json:"phase"`
		} `json:"status"`
	}
	code, err := api.do(ctx, "GET", "/api/v1/namespaces/"+url.PathEscape(ns)+"/persistentvolumeclaims/"+url.PathEscape(claim), nil, &pvc)
	switch {
	case err == nil && code == http.StatusOK && pvc.Status.Phase == "Bound":
		return check{name: "claim", status: "ok", detail: claim + " is bound"}
	case err == nil && code == http.StatusOK:
		return check{name: "claim", status: "warn", detail: claim + " is " + pvc.Status.Phase, hint: "kubectl -n " + ns + " describe pvc " + claim + " says why it is not bound"}
	case err == nil && code == http.StatusNotFound:
		return check{name: "claim", status: "FAIL", detail: "no PersistentVolumeClaim " + claim + " in " + ns, hint: "apply the claim of docs/kubernetes.md, or set BRIDGED_KUBE_CLAIM to the claim the home is on"}
	case err == nil && code == http.StatusForbidden:
		return check{name: "claim", status: "warn", detail: "the daemon may not read the claim " + claim, hint: "add get on persistentvolumeclaims to its Role (docs/kubernetes.md)"}
	}
	return check{name: "claim", status: "FAIL", detail: "get claim " + claim + ": " + kubeErr(code, err), hint: "check the API server and the daemon's credentials"}
}

// kubeAPI is plain JSON over the API server's HTTP client.
type kubeAPI struct {
	host string
	c    *http.Client
}

func (a kubeAPI) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.host+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", path, err)
		}
	}
	return resp.StatusCode, nil
}

// kubeErr is what went wrong with a call: its error, else its status.
func kubeErr(code int, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d %s", code, http.StatusText(code))
}
