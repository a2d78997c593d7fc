package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/nodeagent"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/kopiapath"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
	"github.com/lifeboat-io/lifeboat/internal/workdir"
)

func init() { nodeAgentDataPath = newKopiaDataPath }

// kopiaDataPath is the node agent's data path: kopia repositories where
// Velero keeps them, opened on first use and kept open (their connection
// configs and caches in the process's own work directory, under TMPDIR:
// the DaemonSet's scratch volume) until the node agent stops.
type kopiaDataPath struct {
	*kopiapath.DataPath
	work *workdir.Dir
}

func newKopiaDataPath(_ context.Context, deps nodeagent.Deps) (podvolume.DataPath, error) {
	work, err := workdir.Open("", deps.Log.With("component", "workdir"))
	if err != nil {
		return nil, fmt.Errorf("node agent work directory: %w", err)
	}
	resolver := &locations.Resolver{Client: deps.Client, SecretReader: deps.Reader, Namespace: deps.Namespace}
	repos := &repository.Manager{
		Storage: resolver, Secrets: deps.Reader, Namespace: deps.Namespace,
		WorkDir: work.Path(), Log: deps.Log.With("component", "repositories"),
	}
	dp := &kopiapath.DataPath{Repositories: repos, Log: deps.Log, CheckpointInterval: deps.CheckpointInterval}
	return &kopiaDataPath{DataPath: dp, work: work}, nil
}

// Close closes the repositories, then removes the work directory holding
// their caches.
func (d *kopiaDataPath) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return errors.Join(d.Repositories.Close(ctx), d.work.Close())
}
