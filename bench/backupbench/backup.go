package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// backupRunner runs Lifeboat backups of the bench namespaces through the
// API, as a user would, and times them from outside the server.
type backupRunner struct {
	k          *kube
	srv        *serverProcess
	namespaces []string
	storeRoot  string
	timeout    time.Duration
}

func (b backupRunner) run(ctx context.Context, name string) (lifeboatResult, error) {
	cpuBefore, err := readProcCPU(b.srv.pid())
	if err != nil {
		return lifeboatResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()

	// The watch is open before the create so that the completion event
	// cannot be missed, and so that it arrives as soon as the server
	// writes it: polling would add up to a poll interval to every run,
	// a large error when a backup of 2,000 items takes half a second.
	w, err := b.watch(ctx, name, "")
	if err != nil {
		return lifeboatResult{}, err
	}
	defer func() { w.Stop() }()

	bk := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: name},
		Spec: v1.BackupSpec{
			IncludedNamespaces: b.namespaces,
			StorageLocation:    locationName,
		},
	}
	start := time.Now()
	cctx, ccancel := context.WithTimeout(ctx, callTimeout)
	err = b.k.c.Create(cctx, bk)
	ccancel()
	if err != nil {
		return lifeboatResult{}, fmt.Errorf("creating backup %s: %w", name, err)
	}

	var final *v1.Backup
	var pickup time.Duration
	for final == nil {
		select {
		case <-ctx.Done():
			return lifeboatResult{}, fmt.Errorf("backup %s did not finish within %s: %w", name, b.timeout, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The API server ends watches now and then; carry on from
				// the last state we know of.
				if w, err = b.watch(ctx, name, bk.ResourceVersion); err != nil {
					return lifeboatResult{}, err
				}
				continue
			}
			if ev.Type == watch.Error {
				return lifeboatResult{}, fmt.Errorf("watching backup %s: %v", name, ev.Object)
			}
			got, ok := ev.Object.(*v1.Backup)
			if !ok {
				continue
			}
			bk = got
			if pickup == 0 && got.Status.Phase != "" && got.Status.Phase != v1.BackupPhaseNew {
				pickup = time.Since(start)
			}
			if finished(got.Status.Phase) {
				final = got
			}
		}
		if err := b.srv.exited(); err != nil {
			return lifeboatResult{}, err
		}
	}
	wall := time.Since(start)

	if final.Status.Phase != v1.BackupPhaseCompleted {
		return lifeboatResult{}, fmt.Errorf("backup %s ended %s (failure reason %q, %d errors); server log %s",
			name, final.Status.Phase, final.Status.FailureReason, final.Status.Errors, b.srv.logPath)
	}
	cpuAfter, err := readProcCPU(b.srv.pid())
	if err != nil {
		return lifeboatResult{}, err
	}
	st, err := readProcStatus(b.srv.pid())
	if err != nil {
		return lifeboatResult{}, err
	}
	res := lifeboatResult{
		Name:             name,
		WallSeconds:      wall.Seconds(),
		PickupSeconds:    pickup.Seconds(),
		ServerCPUSeconds: (cpuAfter - cpuBefore).Seconds(),
		PeakRSSKiBSoFar:  st.hwmKiB,
	}
	if p := final.Status.Progress; p != nil {
		res.Items = p.ItemsBackedUp
	}
	if s, c := final.Status.StartTimestamp, final.Status.CompletionTimestamp; s != nil && c != nil {
		res.ServerSeconds = c.Sub(s.Time).Seconds()
	}
	if fi, err := os.Stat(filepath.Join(b.storeRoot, bucket, "backups", name, name+".tar.gz")); err == nil {
		res.ArchiveBytes = fi.Size()
	}
	return res, nil
}

// watch watches the one backup called name.
func (b backupRunner) watch(ctx context.Context, name, resourceVersion string) (watch.Interface, error) {
	opts := []client.ListOption{
		client.InNamespace(serverNamespace),
		client.MatchingFields{"metadata.name": name},
	}
	if resourceVersion != "" {
		opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: resourceVersion}})
	}
	w, err := b.k.c.Watch(ctx, &v1.BackupList{}, opts...)
	if err != nil {
		return nil, fmt.Errorf("watching backup %s: %w", name, err)
	}
	return w, nil
}

// finished tells the phases a backup never leaves.
func finished(p v1.BackupPhase) bool {
	switch p {
	case v1.BackupPhaseCompleted, v1.BackupPhasePartiallyFailed, v1.BackupPhaseFailed, v1.BackupPhaseFailedValidation:
		return true
	}
	return false
}
