package container

import (
	"context"
	"fmt"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// restPods is a PodClient over a REST client that knows core/v1 only:
// client-go's typed clientset registers every API group's types, which
// doubled the daemon's binary; the engine needs Pods and nothing else.
type restPods struct {
	c      *rest.RESTClient
	ns     string
	params runtime.ParameterCodec
}

var _ PodClient = (*restPods)(nil)

// KubePods is the Pods of namespace ns on the API server rc names.
func KubePods(rc *rest.Config, ns string) (PodClient, error) {
	return newRESTPods(rc, ns)
}

func newRESTPods(rc *rest.Config, ns string) (*restPods, error) {
	sch := runtime.NewScheme()
	if err := corev1.AddToScheme(sch); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(sch, corev1.SchemeGroupVersion)
	cfg := rest.CopyConfig(rc)
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.APIPath = "/api"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(sch).WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = "bridged"
	}
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &restPods{c: c, ns: ns, params: runtime.NewParameterCodec(sch)}, nil
}

func (p *restPods) Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := p.c.Post().Namespace(p.ns).Resource("pods").VersionedParams(&opts, p.params).Body(pod).Do(ctx).Into(out)
	return out, err
}

func (p *restPods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := p.c.Get().Namespace(p.ns).Resource("pods").Name(name).VersionedParams(&opts, p.params).Do(ctx).Into(out)
	return out, err
}

func (p *restPods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := p.c.Get().Namespace(p.ns).Resource("pods").VersionedParams(&opts, p.params).Do(ctx).Into(out)
	return out, err
}

func (p *restPods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return p.c.Get().Namespace(p.ns).Resource("pods").VersionedParams(&opts, p.params).Watch(ctx)
}

func (p *restPods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return p.c.Delete().Namespace(p.ns).Resource("pods").Name(name).Body(&opts).Do(ctx).Error()
}

// attachURL is the attach subresource of pod: its agent container's
// stdin, stdout and stderr.
func (p *restPods) attachURL(pod string) *url.URL {
	return p.c.Post().Namespace(p.ns).Resource("pods").Name(pod).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: AgentContainer, Stdin: true, Stdout: true, Stderr: true}, p.params).URL()
}
