package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/controller"
)

// readiness is what /readyz reports. A server is ready when its cache has
// synced and, if it leads, it has checked every storage location of its
// namespace at least once. A standby is ready as soon as its cache has
// synced: it is ready to take over, and a rolling update must be able to
// proceed past it.
type readiness struct {
	cache   cache.Cache
	elected <-chan struct{}
	checks  *controller.LocationChecks
	// locationsChecked latches: a location created later is checked within
	// seconds, and readiness must not flap while it is.
	locationsChecked atomic.Bool
}

// cacheSynced is the readyz check "cache".
func (r *readiness) cacheSynced(req *http.Request) error {
	ctx, cancel := context.WithTimeout(req.Context(), time.Second)
	defer cancel()
	if !r.cache.WaitForCacheSync(ctx) {
		return errors.New("the server's cache of its namespace has not synced yet")
	}
	return nil
}

// locations is the readyz check "locations".
func (r *readiness) locations(req *http.Request) error {
	select {
	case <-r.elected:
	default:
		return nil // standby
	}
	if r.locationsChecked.Load() {
		return nil
	}
	var list v1.BackupStorageLocationList
	if err := r.cache.List(req.Context(), &list); err != nil {
		return fmt.Errorf("listing storage locations: %w", err)
	}
	var pending []string
	for i := range list.Items {
		if key := client.ObjectKeyFromObject(&list.Items[i]); !r.checks.Checked(key) {
			pending = append(pending, key.String())
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("storage locations not checked yet: %s", strings.Join(pending, ", "))
	}
	r.locationsChecked.Store(true)
	return nil
}
