package hostpods

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(vols ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-0", UID: "0f1e2d3c-uid"},
		Spec:       corev1.PodSpec{Volumes: vols},
	}
}

func claimVol(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func pvc(name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}}
}

func TestDir(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	fs := corev1.PersistentVolumeFilesystem
	tests := []struct {
		name    string
		facts   Facts
		want    Volume
		wantErr string
	}{
		{
			name:  "emptyDir is its own name",
			facts: Facts{Pod: pod(corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}), Volume: "cache"},
			want:  Volume{Dir: "cache"},
		},
		{
			name:  "inline CSI volume is under mount",
			facts: Facts{Pod: pod(corev1.Volume{Name: "eph", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d"}}}), Volume: "eph"},
			want:  Volume{Dir: "eph/mount"},
		},
		{
			name: "claim on a local PV is the PV's name",
			facts: Facts{Pod: pod(claimVol("data", "data-web-0")), Volume: "data", PVC: pvc("data-web-0", "local-pv-1"),
				PV: &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "local-pv-1"}, Spec: corev1.PersistentVolumeSpec{
					VolumeMode: &fs, PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disk"}}}}},
			want: Volume{Dir: "local-pv-1"},
		},
		{
			name: "claim on a CSI PV is the PV's name under mount",
			facts: Facts{Pod: pod(claimVol("data", "c")), Volume: "data", PVC: pvc("c", "pvc-123"),
				PV: &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-123"}, Spec: corev1.PersistentVolumeSpec{
					PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}}}}},
			want: Volume{Dir: "pvc-123/mount"},
		},
		{
			name: "migrated in-tree PV whose driver is registered counts as CSI",
			facts: Facts{Pod: pod(claimVol("data", "c")), Volume: "data", PVC: pvc("c", "pv-m"), CSIDrivers: []string{"other", "ebs.csi.aws.com"},
				PV: &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-m", Annotations: map[string]string{annMigratedTo: "ebs.csi.aws.com"}}}},
			want: Volume{Dir: "pv-m/mount"},
		},
		{
			name: "provisioned-by a driver that is not registered is not CSI",
			facts: Facts{Pod: pod(claimVol("data", "c")), Volume: "data", PVC: pvc("c", "pv-p"), CSIDrivers: []string{"other"},
				PV: &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-p", Annotations: map[string]string{annProvisionedBy: "kubernetes.io/aws-ebs"}}}},
			want: Volume{Dir: "pv-p"},
		},
		{
			name: "block CSI volume is the PV's name under volumeDevices",
			facts: Facts{Pod: pod(claimVol("raw", "c")), Volume: "raw", PVC: pvc("c", "pvc-blk"),
				PV: &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-blk"}, Spec: corev1.PersistentVolumeSpec{VolumeMode: &block,
					PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d"}}}}},
			want: Volume{Dir: "pvc-blk", Block: true},
		},
		{
			name:    "inline hostPath is refused naming pod and volume",
			facts:   Facts{Pod: pod(corev1.Volume{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}}), Volume: "logs"},
			wantErr: `volume "logs" of pod app/web-0: hostPath volumes are not supported`,
		},
		{
			name: "claim on a hostPath PV is refused",
			facts: Facts{Pod: pod(claimVol("data", "c")), Volume: "data", PVC: pvc("c", "hp"),
				PV: &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "hp"}, Spec: corev1.PersistentVolumeSpec{
					PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv"}}}}},
			wantErr: `volume "data" of pod app/web-0 (claim c, volume hp): hostPath volumes are not supported`,
		},
		{
			name:    "unknown volume",
			facts:   Facts{Pod: pod(), Volume: "nope"},
			wantErr: `volume "nope" of pod app/web-0: the pod has no such volume`,
		},
		{
			name:    "unbound claim",
			facts:   Facts{Pod: pod(claimVol("data", "c")), Volume: "data", PVC: pvc("c", "")},
			wantErr: `volume "data" of pod app/web-0: claim c is not bound to a volume`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Dir(tt.facts)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("Dir() error = %v, want one starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Dir(): %v", err)
			}
			if got != tt.want {
				t.Errorf("Dir() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestHostPathIsErrHostPath(t *testing.T) {
	_, err := Dir(Facts{Pod: pod(corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}), Volume: "h"})
	if !errors.Is(err, ErrHostPath) {
		t.Fatalf("error %v is not ErrHostPath", err)
	}
}

func TestFind(t *testing.T) {
	root := t.TempDir()
	p := pod()
	mk := func(rel string) string {
		dir := filepath.Join(root, string(p.UID), rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	empty := mk("volumes/kubernetes.io~empty-dir/cache")
	csi := mk("volumes/kubernetes.io~csi/pvc-123/mount")
	blk := mk("volumeDevices/kubernetes.io~csi/pvc-blk")
	mk("volumes/kubernetes.io~empty-dir/twice")
	mk("volumes/kubernetes.io~configmap/twice")

	for _, tt := range []struct {
		v    Volume
		want string
	}{
		{Volume{Dir: "cache"}, empty},
		{Volume{Dir: "pvc-123/mount"}, csi},
		{Volume{Dir: "pvc-blk", Block: true}, blk},
	} {
		got, err := Find(root, p, tt.v)
		if err != nil || got != tt.want {
			t.Errorf("Find(%+v) = %q, %v; want %q", tt.v, got, err, tt.want)
		}
	}

	_, err := Find(root, p, Volume{Dir: "gone"})
	wantPattern := filepath.Join(root, string(p.UID), "volumes", "*", "gone")
	if err == nil || !strings.Contains(err.Error(), wantPattern) || !strings.Contains(err.Error(), "app/web-0") {
		t.Errorf("Find(missing) error = %v, want one naming %s and the pod", err, wantPattern)
	}
	if _, err := Find(root, p, Volume{Dir: "twice"}); err == nil || !strings.Contains(err.Error(), "2 directories") {
		t.Errorf("Find(ambiguous) error = %v, want 2 directories", err)
	}
}
