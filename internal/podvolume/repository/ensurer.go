package repository

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// BackupRepository labels, as Velero selects its objects by them.
const (
	VolumeNamespaceLabel = "velero.io/volume-namespace"
	RepositoryTypeLabel  = "velero.io/repository-type"
	// TypeKopia is the only repository type Lifeboat serves.
	TypeKopia = "kopia"
	// DefaultMaintenanceFrequency is Velero's for kopia repositories:
	// kopia's own schedule then decides between quick and full runs.
	DefaultMaintenanceFrequency = time.Hour
)

// BackupRepository phases.
const (
	PhaseNew      v1.BackupRepositoryPhase = "New"
	PhaseReady    v1.BackupRepositoryPhase = "Ready"
	PhaseNotReady v1.BackupRepositoryPhase = "NotReady"
)

// ObjectName is Velero's name of the BackupRepository of (volume
// namespace, location): deterministic, so that concurrent callers create
// one object.
func ObjectName(volumeNamespace, location string) string {
	return fmt.Sprintf("%s-%s-%s", volumeNamespace, location, TypeKopia)
}

// Labels are the BackupRepository's labels, which find it.
func Labels(volumeNamespace, location string) map[string]string {
	return map[string]string{
		VolumeNamespaceLabel:    v1.LabelValue(volumeNamespace),
		v1.StorageLocationLabel: v1.LabelValue(location),
		RepositoryTypeLabel:     TypeKopia,
	}
}

// NewBackupRepository is the object Velero creates for a repository.
func NewBackupRepository(namespace, volumeNamespace, location string) *v1.BackupRepository {
	return &v1.BackupRepository{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      ObjectName(volumeNamespace, location),
			Labels:    Labels(volumeNamespace, location),
		},
		Spec: v1.BackupRepositorySpec{
			VolumeNamespace:       volumeNamespace,
			BackupStorageLocation: location,
			RepositoryType:        TypeKopia,
		},
	}
}

// Ensurer gets the BackupRepository of (volume namespace, location) ready:
// it creates the object when there is none and waits for the server's
// reconciler to make it Ready, as Velero's backup and restore do before
// they hand volumes to the node agent.
type Ensurer struct {
	Client    client.Client
	Namespace string
	// Timeout bounds the wait for Ready; 0 means 5 minutes.
	Timeout time.Duration

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// ErrNotReady says the repository's object is NotReady; its message says why.
var ErrNotReady = errors.New("backup repository not ready")

// Ensure returns the Ready BackupRepository of (volumeNamespace, location).
func (e *Ensurer) Ensure(ctx context.Context, volumeNamespace, location string) (*v1.BackupRepository, error) {
	if volumeNamespace == "" || location == "" {
		return nil, fmt.Errorf("backup repository: volume namespace %q and location %q must both be set", volumeNamespace, location)
	}
	lock := e.lock(volumeNamespace + "/" + location)
	lock.Lock()
	defer lock.Unlock()

	br, err := e.find(ctx, volumeNamespace, location)
	if err != nil {
		return nil, err
	}
	if br == nil {
		obj := NewBackupRepository(e.Namespace, volumeNamespace, location)
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := e.Client.Create(cctx, obj)
		cancel()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating BackupRepository %s/%s: %w", e.Namespace, obj.Name, err)
		}
	}
	timeout := e.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		found, err := e.find(ctx, volumeNamespace, location)
		if err != nil {
			return false, err
		}
		switch {
		case found == nil:
			last = errors.New("the BackupRepository is gone")
			return false, nil
		case found.Status.Phase == PhaseNotReady:
			return false, fmt.Errorf("%w: BackupRepository %s/%s: %s", ErrNotReady, found.Namespace, found.Name, found.Status.Message)
		case found.Status.Phase == PhaseReady:
			br = found
			return true, nil
		}
		last = fmt.Errorf("BackupRepository %s/%s is not set up yet (is the server running?)", found.Namespace, found.Name)
		return false, nil
	})
	if err != nil {
		if errors.Is(err, ErrNotReady) || last == nil {
			return nil, err
		}
		return nil, fmt.Errorf("waiting for the repository of namespace %q in location %q: %w (%w)", volumeNamespace, location, last, err)
	}
	return br, nil
}

func (e *Ensurer) find(ctx context.Context, volumeNamespace, location string) (*v1.BackupRepository, error) {
	var list v1.BackupRepositoryList
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := e.Client.List(cctx, &list, client.InNamespace(e.Namespace), client.MatchingLabels(Labels(volumeNamespace, location))); err != nil {
		return nil, fmt.Errorf("listing BackupRepositories: %w", err)
	}
	switch len(list.Items) {
	case 0:
		return nil, nil
	case 1:
		return &list.Items[0], nil
	}
	return nil, fmt.Errorf("%d BackupRepositories of namespace %q, location %q, type kopia in %s; delete all but one", len(list.Items), volumeNamespace, location, e.Namespace)
}

func (e *Ensurer) lock(k string) *sync.Mutex {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.locks == nil {
		e.locks = map[string]*sync.Mutex{}
	}
	if e.locks[k] == nil {
		e.locks[k] = &sync.Mutex{}
	}
	return e.locks[k]
}
