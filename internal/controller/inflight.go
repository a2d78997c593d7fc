package controller

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// inFlight is the set of objects this process is working on right now. A
// backup, restore or deletion request found InProgress that is not in it
// was left so by a server that stopped, and is failed or resumed rather
// than waited for.
type inFlight struct{ m sync.Map }

// add records key until the returned function is called.
func (s *inFlight) add(key client.ObjectKey) (done func()) {
	s.m.Store(key, struct{}{})
	return func() { s.m.Delete(key) }
}

// has reports whether key is being worked on here.
func (s *inFlight) has(key client.ObjectKey) bool {
	_, ok := s.m.Load(key)
	return ok
}
