package cli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func samplePVR(name, pod, volume string, phase v1.PodVolumePhase, total, done int64) *v1.PodVolumeRestore {
	p := &v1.PodVolumeRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name,
		Labels: map[string]string{v1.RestoreNameLabel: "web-copy"}}}
	p.Spec.Pod = corev1.ObjectReference{Kind: "Pod", Namespace: "shop-copy", Name: pod}
	p.Spec.Volume, p.Spec.UploaderType = volume, "kopia"
	p.Status.Phase = phase
	p.Status.Progress.TotalBytes, p.Status.Progress.BytesDone = total, done
	return p
}

// Velero's "kopia Restores" section: counts by phase, with --details the
// volumes of each pod; another restore's PodVolumeRestores are not shown.
func TestRestoreDescribePodVolumeRestores(t *testing.T) {
	done, _ := sampleRestores()
	other := samplePVR("other-1", "db", "x", v1.PodVolumePhaseFailed, 0, 0)
	other.Labels[v1.RestoreNameLabel] = "another"
	c := newFakeBuilder(t, done,
		samplePVR("web-copy-a", "web", "data", v1.PodVolumePhaseCompleted, 4096, 4096),
		samplePVR("web-copy-b", "web", "cache", v1.PodVolumePhaseCompleted, 0, 0),
		samplePVR("web-copy-c", "db", "wal", v1.PodVolumePhaseInProgress, 200, 50),
		samplePVR("web-copy-d", "db", "logs", "", 0, 0),
		other,
	).Build()
	out, _, err := run(t, newTestFactory(c), "restore", "describe", "web-copy")
	if err != nil {
		t.Fatal(err)
	}
	want := "kopia Restores (specify --details for more information):\n Completed: 2\n In Progress: 1\n New: 1\n"
	if got := squeeze(out); !strings.Contains(got, want) || strings.Contains(got, "Failed:") {
		t.Errorf("description lacks %q (or shows another restore's):\n%s", want, out)
	}

	out, _, err = run(t, newTestFactory(c), "restore", "describe", "web-copy", "--details")
	if err != nil {
		t.Fatal(err)
	}
	want = "kopia Restores:\n Completed:\n shop-copy/web: cache, data (size: 4096)\n In Progress:\n shop-copy/db: wal (25.00%)\n New:\n shop-copy/db: logs\n"
	if got := squeeze(out); !strings.Contains(got, want) {
		t.Errorf("description lacks %q:\n%s", want, out)
	}
}
