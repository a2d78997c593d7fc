package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/plugintest"
)

// pluginError checks that err is the plugin's own error, carried over the
// wire, and that its message contains want.
func pluginError(t *testing.T, method string, err error, want string) {
	t.Helper()
	var pe *framework.PluginError
	if !errors.As(err, &pe) {
		t.Errorf("%s: error %v (%T) is not a *framework.PluginError", method, err, err)
		return
	}
	if pe.Name != Name || pe.Method != method || !strings.Contains(pe.Message(), want) {
		t.Errorf("%s: error %q from %s %s, want one from %s %s containing %q", method, pe.Message(), pe.Name, pe.Method, Name, method, want)
	}
}

// These tests serve the Server main serves, in process with plugintest:
// the plugin protocol end to end, without building the binary.
func TestServesItsName(t *testing.T) {
	ids := plugintest.Serve(t, newServer()).Plugins()
	if len(ids) != 1 || ids[0].Kind != api.KindVolumeSnapshotter || ids[0].Name != Name {
		t.Errorf("the binary serves %+v, want only VolumeSnapshotter %s", ids, Name)
	}
}

// Every method, called as the server will call it: through
// framework.VolumeSnapshotterClient over gRPC (plugintest.Conn gives the
// server's client).
func TestRoundTripThroughThePluginProtocol(t *testing.T) {
	vs := plugintest.Serve(t, newServer()).VolumeSnapshotter(Name)
	dir := filepath.Join(t.TempDir(), "snaps")

	// Init: a bad config is refused with the keys named; dir is created.
	pluginError(t, "Init", vs.Init(map[string]string{DirKey: dir, "dri": "x"}), `unknown config keys ["dri"]`)
	if err := vs.Init(map[string]string{DirKey: dir}); err != nil {
		t.Fatal(err)
	}

	// Backup: GetVolumeID, GetVolumeInfo, CreateSnapshot.
	csi := pv(map[string]any{"csi": map[string]any{"driver": "hostpath.csi.k8s.io", "volumeHandle": "0b5c-42"}})
	volumeID, err := vs.GetVolumeID(csi)
	if err != nil || volumeID != "0b5c-42" {
		t.Fatalf("GetVolumeID = %q, %v", volumeID, err)
	}
	if id, err := vs.GetVolumeID(pv(map[string]any{"awsElasticBlockStore": map[string]any{"volumeID": "vol-1"}})); id != "" || err != nil {
		t.Errorf("GetVolumeID of a volume it cannot snapshot = %q, %v; want \"\", nil", id, err)
	}
	volumeType, iops, err := vs.GetVolumeInfo(volumeID, "zone-a")
	if err != nil || volumeType != "file" || iops != nil {
		t.Errorf("GetVolumeInfo = %q, %v, %v; want file, nil, nil", volumeType, iops, err)
	}
	tags := map[string]string{"velero.io/backup": "nightly", "velero.io/pv": "pv-1"}
	snap, err := vs.CreateSnapshot(volumeID, "zone-a", tags)
	if err != nil {
		t.Fatal(err)
	}
	snapFile := filepath.Join(dir, "snapshots", snap+".json")
	got := readJSON[Snapshot](t, snapFile)
	if got.SnapshotID != snap || got.VolumeID != volumeID || got.VolumeAZ != "zone-a" || got.Tags["velero.io/backup"] != "nightly" || got.CreatedAt.IsZero() {
		t.Errorf("%s holds %+v", snapFile, got)
	}

	// Restore: CreateVolumeFromSnapshot, SetVolumeID.
	n := int64(3000)
	restored, err := vs.CreateVolumeFromSnapshot(snap, volumeType, "zone-b", &n)
	if err != nil {
		t.Fatal(err)
	}
	if want := "restored-" + snap + "-1"; restored != want {
		t.Errorf("CreateVolumeFromSnapshot = %q, want %q", restored, want)
	}
	vol := readJSON[Volume](t, filepath.Join(dir, "volumes", restored+".json"))
	if vol.SnapshotID != snap || vol.SourceVolumeID != volumeID || vol.VolumeType != "file" || vol.VolumeAZ != "zone-b" || vol.IOPS == nil || *vol.IOPS != n {
		t.Errorf("volume file holds %+v", vol)
	}
	_, err = vs.CreateVolumeFromSnapshot("snap-missing", "file", "", nil)
	pluginError(t, "CreateVolumeFromSnapshot", err, `"snap-missing": no such snapshot`)
	_, err = vs.CreateVolumeFromSnapshot("../victim", "file", "", nil)
	pluginError(t, "CreateVolumeFromSnapshot", err, "would leave the directory")

	updated, err := vs.SetVolumeID(csi, restored)
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := unstructured.NestedString(updated.UnstructuredContent(), "spec", "csi", "volumeHandle"); h != restored {
		t.Errorf("SetVolumeID left volumeHandle %q, want %q", h, restored)
	}
	if d, _, _ := unstructured.NestedString(updated.UnstructuredContent(), "spec", "csi", "driver"); d != "hostpath.csi.k8s.io" {
		t.Errorf("SetVolumeID changed the driver to %q", d)
	}
	_, err = vs.SetVolumeID(pv(nil), restored)
	pluginError(t, "SetVolumeID", err, "has no csi, hostPath, nfs or local volume source")

	// Delete: the file goes; deleting it again is no error; escapes are
	// refused.
	if err := vs.DeleteSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(snapFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after DeleteSnapshot: %v", snapFile, err)
	}
	if err := vs.DeleteSnapshot(snap); err != nil {
		t.Errorf("DeleteSnapshot of a deleted snapshot: %v", err)
	}
	pluginError(t, "DeleteSnapshot", vs.DeleteSnapshot("../volumes/"+restored), "would leave the directory")
	if got := files(t, dir, "volumes"); !slices.Equal(got, []string{restored + ".json"}) {
		t.Errorf("volumes/ holds %q", got)
	}
}
