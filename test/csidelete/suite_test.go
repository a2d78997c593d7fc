// Package csidelete deletes backups with CSI snapshots end to end, on the
// real CSI stack (snapshot controller, csi-snapshotter, csi-provisioner,
// kube-controller-manager's volume controllers and the project's host-path
// driver, internal/testutil/csistack) under a real Lifeboat server: a
// backup Velero v1.18.3 would have written (internal/testutil/velerocsi),
// whose VolumeSnapshots and contents are gone from the cluster, is deleted
// by command and by TTL, with and without its tarball, and no snapshot may
// be left in the driver.
package csidelete

import (
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// A snapshot no snapshotter takes up fails its deletion after 5 s
	// instead of 2 minutes; the real stack answers in well under a second.
	testenv.Main(m, testenv.Options{CSI: true, CSISnapshotWait: 5 * time.Second}, &env)
}
