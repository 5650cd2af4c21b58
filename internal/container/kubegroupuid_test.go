package container

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// With a uid per group (the daemon's GroupUIDs, decision records 33 and
// 43), each group's Pod runs as its own uid and gid, the ones its
// directories were given to, and still passes `restricted` (the fake
// kubelet's admission refuses one that does not).
func TestKubernetesPodRunsAsItsGroupUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: a uid per group needs a daemon that can give directories away (root); these tests run as uid ", os.Geteuid())
	}
	b := newBuilder(t)
	uids, err := home.OpenGroupUIDs(b.Home.Layout(), b.UID)
	if err != nil {
		t.Fatal(err)
	}
	b.GroupUIDs = uids
	k := newKubelet(t)
	e, _ := k.engine(t, func(o *KubeOptions) { o.HomeDir = b.Home.Layout().Dir })
	got := map[string]int64{}
	for _, g := range []store.Group{{Chat: "local:family", Name: "Family", Folder: "family"}, {Chat: "local:friends", Name: "Friends", Folder: "friends"}} {
		name := "bridged-" + string(g.Folder) + "-1"
		spec, release, err := b.Build(zerolog.Nop(), g, name, ipc.RunInput{Prompt: "result hi", Group: string(g.Folder), Chat: string(g.Chat), AssistantName: "Robo", Timezone: "UTC"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
		run := start(t, e, spec)
		if res := nextResult(t, run, time.Minute); res.Text != "hi" {
			t.Fatalf("result %+v", res)
		}
		pod, err := k.cs.CoreV1().Pods(kubeNS).Get(context.Background(), run.ID(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := uids.UID(string(g.Folder))
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range []struct{ u, g *int64 }{
			{pod.Spec.SecurityContext.RunAsUser, pod.Spec.SecurityContext.RunAsGroup},
			{pod.Spec.Containers[0].SecurityContext.RunAsUser, pod.Spec.Containers[0].SecurityContext.RunAsGroup},
		} {
			if sc.u == nil || sc.g == nil || *sc.u != int64(want) || *sc.g != int64(want) {
				t.Errorf("Pod of %s runs as %v:%v; want its group's uid and gid %d", g.Folder, sc.u, sc.g, want)
			}
		}
		if why := restrictedProblem(t, pod); why != "" {
			t.Errorf("Pod of %s fails restricted: %s", g.Folder, why)
		}
		got[string(g.Folder)] = *pod.Spec.SecurityContext.RunAsUser
	}
	if got["family"] == got["friends"] {
		t.Errorf("both groups' Pods run as %d; want a uid each", got["family"])
	}
}
