package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// maxOutput bounds what is kept of a command's stdout and of its stderr
// for the log: a hook that prints a database dump must not fill memory.
const maxOutput = 16 << 10

// Executor runs a command in a container of a pod and returns what it
// printed. The error says how the command ended (a non-zero exit, a
// timeout, a refusal by the API server).
type Executor interface {
	Exec(ctx context.Context, namespace, pod, container string, command []string) (stdout, stderr string, err error)
}

// RemoteExecutor runs commands through the API server's pods/exec
// subresource, as kubectl exec does: over WebSocket, falling back to SPDY
// where the API server or a proxy on the way cannot upgrade to it.
type RemoteExecutor struct {
	config *rest.Config
	client rest.Interface
}

// NewRemoteExecutor execs with the server's config; client is a core/v1
// REST client (Typed.CoreV1().RESTClient()).
func NewRemoteExecutor(config *rest.Config, client rest.Interface) *RemoteExecutor {
	return &RemoteExecutor{config: config, client: client}
}

// Exec implements Executor; ctx bounds the command.
func (e *RemoteExecutor) Exec(ctx context.Context, namespace, pod, container string, command []string) (string, string, error) {
	req := e.client.Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := e.executor(req.URL())
	if err != nil {
		return "", "", err
	}
	stdout, stderr := &capped{max: maxOutput}, &capped{max: maxOutput}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	return stdout.String(), stderr.String(), err
}

func (e *RemoteExecutor) executor(u *url.URL) (remotecommand.Executor, error) {
	spdy, err := remotecommand.NewSPDYExecutor(e.config, "POST", u)
	if err != nil {
		return nil, fmt.Errorf("preparing the exec request: %w", err)
	}
	// WebSocket upgrades are GET requests (RFC 6455).
	ws, err := remotecommand.NewWebSocketExecutor(e.config, "GET", u.String())
	if err != nil {
		return nil, fmt.Errorf("preparing the exec request: %w", err)
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	buf     bytes.Buffer
	max     int
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room >= len(p) {
		c.buf.Write(p)
	} else {
		if room > 0 {
			c.buf.Write(p[:room])
		}
		c.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}

func (c *capped) String() string {
	if c.dropped > 0 {
		return fmt.Sprintf("%s... (%d more bytes)", c.buf.String(), c.dropped)
	}
	return c.buf.String()
}

// Result is how one hook ended in one pod.
type Result struct {
	Hook Exec
	// Pod is namespace/name.
	Pod string
	// Container is where it ran (the first container when the hook named
	// none).
	Container string
	// Ran is false for a hook not run because an earlier one failed with
	// onError Fail: Velero counts it attempted, not failed.
	Ran            bool
	Stdout, Stderr string
	Err            error
}

// Failed reports whether the hook ran (or was meant to) and failed.
func (r Result) Failed() bool { return r.Err != nil }

// Error names the pod, the hook and the container, for the results.
func (r Result) Error() string {
	return fmt.Sprintf("%s in container %q of pod %s failed: %v", r.Hook.Describe(), r.Container, r.Pod, r.Err)
}

// errNotRunning is returned for a pod whose phase is not Running: exec
// can only reach running containers, and Velero's silent success for a
// finished pod would hide that the hook never ran.
var errNotRunning = errors.New("pod is not running")

// RunBackupHooks runs a phase's hooks in a pod, in order, as Velero does:
// after a hook with onError Fail fails, the rest are not run (counted, not
// run). stopped reports that failure: for pre hooks the pod must then be
// left out of the backup. pod is as listed; a pod that is not Running, or
// lacks the container, fails the hook without an exec.
func RunBackupHooks(ctx context.Context, ex Executor, pod *corev1.Pod, hooks []Exec) (results []Result, stopped bool) {
	for _, h := range hooks {
		res := Result{Hook: h, Pod: pod.Namespace + "/" + pod.Name}
		if stopped {
			results = append(results, res)
			continue
		}
		res.Ran = true
		res.Container, res.Err = resolveContainer(pod, h.Container)
		if res.Err == nil && pod.Status.Phase != corev1.PodRunning {
			res.Err = fmt.Errorf("%w: its phase is %q", errNotRunning, pod.Status.Phase)
		}
		if res.Err == nil {
			res.Stdout, res.Stderr, res.Err = run(ctx, ex, pod.Namespace, pod.Name, res.Container, h)
		}
		if res.Err != nil && h.stopsOthers() {
			stopped = true
		}
		results = append(results, res)
	}
	return results, stopped
}

func run(ctx context.Context, ex Executor, namespace, pod, container string, h Exec) (string, string, error) {
	if len(h.Command) == 0 {
		return "", "", errors.New("the hook has no command")
	}
	cctx, cancel := context.WithTimeoutCause(ctx, h.timeout(), fmt.Errorf("timed out after %s", h.timeout()))
	defer cancel()
	return ex.Exec(cctx, namespace, pod, container, h.Command)
}

// resolveContainer is the container a hook runs in: the named one, which
// the pod must have, or else the pod's first.
func resolveContainer(pod *corev1.Pod, name string) (string, error) {
	if name == "" {
		if len(pod.Spec.Containers) == 0 {
			return "", errors.New("the pod has no containers")
		}
		return pod.Spec.Containers[0].Name, nil
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return name, nil
		}
	}
	return name, fmt.Errorf("the pod has no container %q", name)
}
