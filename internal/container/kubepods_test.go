package container

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The REST client the daemon uses (the fake clientset stands in for it
// elsewhere) speaks the API server's paths, queries, bodies and watch
// stream for Pods, and builds the attach subresource's URL.
func TestKubePodsREST(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	pod := `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"bridged-family-1","namespace":"ns","uid":"u1"},"status":{"phase":"Running","podIP":"10.0.0.9"}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+strings.TrimSpace(string(body)))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			w.Write([]byte(`{"type":"MODIFIED","object":` + pod + "}\n"))
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/pods"):
			w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[` + pod + `]}`))
		case r.Method == http.MethodDelete:
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
		default:
			w.WriteHeader(map[string]int{http.MethodPost: http.StatusCreated}[r.Method] | http.StatusOK)
			w.Write([]byte(pod))
		}
	}))
	defer srv.Close()
	pc, err := newRESTPods(&rest.Config{Host: srv.URL}, "ns")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	created, err := pc.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bridged-family-1"}}, metav1.CreateOptions{})
	if err != nil || created.UID != "u1" {
		t.Fatalf("create: %+v, %v", created, err)
	}
	if _, ip, err := KubeSelf(ctx, pc, "bridged-family-1"); err != nil || ip != "10.0.0.9" {
		t.Fatalf("get: %q, %v", ip, err)
	}
	list, err := pc.List(ctx, metav1.ListOptions{LabelSelector: "bridged.managed=1"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	w, err := pc.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=bridged-family-1"})
	if err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	w.Stop()
	if p, ok := ev.Object.(*corev1.Pod); !ok || ev.Type != "MODIFIED" || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("watch event %+v", ev)
	}
	grace := int64(2)
	if err := pc.Delete(ctx, "bridged-family-1", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	mu.Lock()
	got := strings.Join(seen, "\n")
	mu.Unlock()
	for _, want := range []string{
		"POST /api/v1/namespaces/ns/pods? {",
		"GET /api/v1/namespaces/ns/pods/bridged-family-1? ",
		"GET /api/v1/namespaces/ns/pods?labelSelector=bridged.managed%3D1 ",
		"GET /api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dbridged-family-1&watch=true ",
		`DELETE /api/v1/namespaces/ns/pods/bridged-family-1? {"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":2}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("requests:\n%s\nwant one starting %q", got, want)
		}
	}
	var sent corev1.Pod
	if err := json.Unmarshal([]byte(strings.SplitN(seen[0], " ", 3)[2]), &sent); err != nil || sent.Name != "bridged-family-1" {
		t.Errorf("create body %q: %v", seen[0], err)
	}
	if u := pc.attachURL("bridged-family-1").String(); u != srv.URL+"/api/v1/namespaces/ns/pods/bridged-family-1/attach?container=agent&stderr=true&stdin=true&stdout=true" {
		t.Errorf("attach URL %s", u)
	}
}
