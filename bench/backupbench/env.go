package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/localcluster"
)

// sizeEnv is what one measurement at one N runs against: a fresh local
// cluster holding the bench objects, a storage location over a directory
// of its own, and a `lifeboat server` process.
type sizeEnv struct {
	n               int
	dir             string
	kubeconfig      string
	storeRoot       string
	namespaces      []string
	bytesPerItem    float64
	populateSeconds float64
	k               *kube
	srv             *serverProcess
	// serverArgs and serverEnv are added to every server started from now
	// on: arguments after -server-args, variables to the inherited
	// environment (the plugin measurement's --plugin-dir and KUBECONFIG).
	serverArgs []string
	serverEnv  []string

	c       config
	cluster *localcluster.Cluster
	// cleanups run on close, last added first, after the server stops
	// and before the cluster does (the CSI stack).
	cleanups []func()
}

// setUp starts a fresh cluster, so earlier sizes' objects neither slow the
// API server nor count as items (the local cluster has no namespace
// controller to delete them), creates the bench namespaces and n
// ConfigMaps, the storage location, and starts a fresh server, so its peak
// RSS belongs to this measurement alone. It returns once the server has
// marked the location Available. close stops it all, also after an error.
func setUp(ctx context.Context, c config, n int, label string) (e *sizeEnv, err error) {
	return setUpWith(ctx, c, n, label, func(e *sizeEnv) error {
		e.namespaces = benchNamespaces(n, c.namespaces)
		start := time.Now()
		var err error
		if e.bytesPerItem, err = populate(ctx, e.k, e.namespaces, n, c.itemBytes, c.workers); err != nil {
			return err
		}
		e.populateSeconds = time.Since(start).Seconds()
		logf("N=%d: created %d ConfigMaps in %.1fs (%.0f/s)", n, n, e.populateSeconds, float64(n)/e.populateSeconds)
		return nil
	})
}

// setUpWith is setUp with what goes into the cluster before the server
// starts left to populate, which sets e.namespaces.
func setUpWith(ctx context.Context, c config, n int, label string, populate func(e *sizeEnv) error) (e *sizeEnv, err error) {
	e = &sizeEnv{n: n, c: c, dir: filepath.Join(c.workDir, label)}
	defer func() {
		if err != nil {
			e.close()
			e = nil
		}
	}()
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return e, fmt.Errorf("creating %s: %w", e.dir, err)
	}
	logf("N=%d: starting a local cluster", n)
	if e.cluster, err = localcluster.Start(localcluster.Options{InstallCRDs: true}); err != nil {
		return e, err
	}
	e.kubeconfig = filepath.Join(e.dir, "kubeconfig")
	if err := e.cluster.WriteKubeconfig(e.kubeconfig); err != nil {
		return e, fmt.Errorf("writing kubeconfig: %w", err)
	}
	if e.k, err = newKube(e.cluster.Config); err != nil {
		return e, err
	}

	if err := populate(e); err != nil {
		return e, err
	}

	e.storeRoot = filepath.Join(e.dir, "store")
	if err := createLocation(ctx, e.k, e.storeRoot); err != nil {
		return e, err
	}
	if err := e.startServer("server.log"); err != nil {
		return e, err
	}
	if err := waitLocationAvailable(ctx, e.k, e.srv, 2*time.Minute); err != nil {
		return e, err
	}
	return e, nil
}

// startServer starts a `lifeboat server` logging to logName in the
// measurement's directory.
func (e *sizeEnv) startServer(logName string) error {
	srv, err := startServer(e.c.lifeboatBin, e.kubeconfig, filepath.Join(e.dir, logName), slices.Concat(e.c.serverArgs, e.serverArgs), e.serverEnv)
	if err != nil {
		return err
	}
	e.srv = srv
	return nil
}

// restartServer replaces the server with a fresh process, so that its peak
// RSS counts only what it does from now on, and returns once the new one
// answers a ServerStatusRequest: its controllers are running.
func (e *sizeEnv) restartServer(ctx context.Context, logName string) error {
	if err := e.stopServer(); err != nil {
		return err
	}
	if err := e.startServer(logName); err != nil {
		return err
	}
	return waitServerReady(ctx, e.k, e.srv, 2*time.Minute)
}

func (e *sizeEnv) stopServer() error {
	if e.srv == nil {
		return nil
	}
	srv := e.srv
	e.srv = nil
	if err := srv.stop(); err != nil {
		return fmt.Errorf("stopping the server: %w (log: %s)", err, srv.logPath)
	}
	return nil
}

// serverPeak reads the server's peak (VmHWM) and current RSS.
func (e *sizeEnv) serverPeak() (procStatus, error) {
	if e.srv == nil {
		return procStatus{}, errors.New("no server running")
	}
	return readProcStatus(e.srv.pid())
}

func (e *sizeEnv) close() {
	if err := e.stopServer(); err != nil {
		logf("N=%d: %v", e.n, err)
	}
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
	if e.cluster != nil {
		if err := e.cluster.Stop(); err != nil {
			logf("N=%d: stopping the local cluster: %v", e.n, err)
		}
	}
}
