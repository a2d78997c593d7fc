package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// timed is a velero.io object the server has finished with, and how long
// that took as seen from outside the server.
type timed[T client.Object] struct {
	final T
	// wall is from the create call to the watch event that shows a
	// terminal phase.
	wall time.Duration
	// pickup is the part of wall before the server wrote its first phase
	// other than New: the controller's reaction time.
	pickup time.Duration
}

// createAndWait creates obj (a Backup or a Restore) through the API, as a
// user would, and waits for the server to bring it to a phase it never
// leaves.
//
// The watch is open before the create so that the completion event cannot
// be missed, and so that it arrives as soon as the server writes it:
// polling would add up to a poll interval to every run, a large error when
// a backup of 2,000 items takes a fraction of a second.
func createAndWait[T client.Object](ctx context.Context, k *kube, srv *serverProcess, obj T, list client.ObjectList,
	timeout time.Duration, phase func(T) string, finished func(string) bool, seen ...func(T)) (timed[T], error) {
	var t timed[T]
	// "Backup bench-2000-run1" in messages.
	name := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", list), "*v1."), "List") + " " + obj.GetName()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	w, err := watchOne(ctx, k, list, obj.GetName(), "")
	if err != nil {
		return t, err
	}
	defer func() { w.Stop() }()

	start := time.Now()
	cctx, ccancel := context.WithTimeout(ctx, callTimeout)
	err = k.c.Create(cctx, obj)
	ccancel()
	if err != nil {
		return t, fmt.Errorf("creating %s: %w", name, err)
	}
	resourceVersion := obj.GetResourceVersion()

	for done := false; !done; {
		select {
		case <-ctx.Done():
			return t, fmt.Errorf("%s did not finish within %s: %w", name, timeout, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The API server ends watches now and then; carry on from
				// the last state we know of.
				if w, err = watchOne(ctx, k, list, obj.GetName(), resourceVersion); err != nil {
					return t, err
				}
				continue
			}
			if ev.Type == watch.Error {
				return t, fmt.Errorf("watching %s: %v", name, ev.Object)
			}
			got, ok := ev.Object.(T)
			if !ok {
				continue
			}
			resourceVersion = got.GetResourceVersion()
			p := phase(got)
			if t.pickup == 0 && p != "" && p != "New" {
				t.pickup = time.Since(start)
			}
			for _, f := range seen {
				f(got)
			}
			if finished(p) {
				t.final, done = got, true
			}
		}
		if err := srv.exited(); err != nil {
			return t, err
		}
	}
	t.wall = time.Since(start)
	return t, nil
}

// watchOne watches the one object called name in the server's namespace.
func watchOne(ctx context.Context, k *kube, list client.ObjectList, name, resourceVersion string) (watch.Interface, error) {
	opts := []client.ListOption{
		client.InNamespace(serverNamespace),
		client.MatchingFields{"metadata.name": name},
	}
	if resourceVersion != "" {
		opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: resourceVersion}})
	}
	w, err := k.c.Watch(ctx, list, opts...)
	if err != nil {
		return nil, fmt.Errorf("watching %s %s: %w", strings.TrimPrefix(fmt.Sprintf("%T", list), "*v1."), name, err)
	}
	return w, nil
}
