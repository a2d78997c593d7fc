package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// LocationChecks records which storage locations this server has checked
// since it started, whatever the outcome: the server's readiness waits for
// every location to have been looked at once, so that "ready" means the
// phases the locations show are this server's findings, not what a
// previous server left.
type LocationChecks struct{ m sync.Map }

// Record notes that the location was checked; a nil receiver records nothing.
func (c *LocationChecks) Record(key types.NamespacedName) {
	if c != nil {
		c.m.Store(key, true)
	}
}

// Checked reports whether the location has been checked.
func (c *LocationChecks) Checked(key types.NamespacedName) bool {
	_, ok := c.m.Load(key)
	return ok
}
