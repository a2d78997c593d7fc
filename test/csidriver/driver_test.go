package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var mountCap = []*csi.VolumeCapability{{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}}

func newDriver(t *testing.T) *driver {
	d := &driver{name: "test.csi", version: Version, state: store{root: t.TempDir()}}
	if err := d.state.init(); err != nil {
		t.Fatal(err)
	}
	return d
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
}

// The CSI spec's idempotency: the same name gives the same object, a
// different request under a used name is AlreadyExists, deleting what is
// gone succeeds.
func TestIdempotentByName(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	req := &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: mountCap, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}}
	v1, err := d.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := d.CreateVolume(ctx, req)
	if err != nil || v2.Volume.VolumeId != v1.Volume.VolumeId {
		t.Fatalf("repeat create = %v, %v; want volume %s", v2, err, v1.Volume.VolumeId)
	}
	req.CapacityRange.RequiredBytes = 2 << 20
	_, err = d.CreateVolume(ctx, req)
	wantCode(t, err, codes.AlreadyExists)

	s1, err := d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: v1.Volume.VolumeId})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: v1.Volume.VolumeId})
	if err != nil || s2.Snapshot.SnapshotId != s1.Snapshot.SnapshotId || !s2.Snapshot.CreationTime.AsTime().Equal(s1.Snapshot.CreationTime.AsTime()) {
		t.Fatalf("repeat snapshot = %v, %v; want %v", s2, err, s1)
	}
	other, err := d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-2", VolumeCapabilities: mountCap})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: other.Volume.VolumeId})
	wantCode(t, err, codes.AlreadyExists)

	for i := 0; i < 2; i++ {
		if _, err := d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: s1.Snapshot.SnapshotId}); err != nil {
			t.Fatalf("delete snapshot #%d: %v", i+1, err)
		}
		if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v1.Volume.VolumeId}); err != nil {
			t.Fatalf("delete volume #%d: %v", i+1, err)
		}
	}
	if ids, _ := d.state.list(snapshotsDir); len(ids) != 0 {
		t.Fatalf("snapshots left: %v", ids)
	}
	// IDs not of this driver are not paths into its state.
	if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "../snapshots"}); err != nil {
		t.Fatal(err)
	}
	_, err = d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: mountCap,
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "../volumes/" + other.Volume.VolumeId}}}})
	wantCode(t, err, codes.NotFound)
}

// A snapshot is a copy of the volume's files at the time it was taken, and
// a volume created from it starts with them.
func TestSnapshotCopiesAndRestores(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	v, err := d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-a", VolumeCapabilities: mountCap})
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(d.state.dir(volumesDir, v.Volume.VolumeId), dataDir)
	if err := os.MkdirAll(filepath.Join(data, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "sub", "f"), []byte("before"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: v.Volume.VolumeId})
	if err != nil {
		t.Fatal(err)
	}
	if s.Snapshot.SizeBytes != int64(len("before")) || !s.Snapshot.ReadyToUse {
		t.Fatalf("snapshot = %v, want size %d and ready", s.Snapshot, len("before"))
	}
	if err := os.WriteFile(filepath.Join(data, "sub", "f"), []byte("after"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-b", VolumeCapabilities: mountCap,
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: s.Snapshot.SnapshotId}}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Volume.ContentSource.GetSnapshot().GetSnapshotId() != s.Snapshot.SnapshotId {
		t.Fatalf("restored volume's content source = %v", r.Volume.ContentSource)
	}
	got, err := os.ReadFile(filepath.Join(d.state.dir(volumesDir, r.Volume.VolumeId), dataDir, "sub", "f"))
	if err != nil || string(got) != "before" {
		t.Fatalf("restored file = %q, %v; want %q", got, err, "before")
	}
}

func TestListSnapshotsFiltersAndPages(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	var vols []string
	for _, n := range []string{"a", "b"} {
		v, err := d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: n, VolumeCapabilities: mountCap})
		if err != nil {
			t.Fatal(err)
		}
		vols = append(vols, v.Volume.VolumeId)
	}
	for _, n := range []string{"s1", "s2", "s3"} {
		if _, err := d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: n, SourceVolumeId: vols[0]}); err != nil {
			t.Fatal(err)
		}
	}
	only, err := d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s4", SourceVolumeId: vols[1]})
	if err != nil {
		t.Fatal(err)
	}
	byVol, err := d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: vols[1]})
	if err != nil || len(byVol.Entries) != 1 || byVol.Entries[0].Snapshot.SnapshotId != only.Snapshot.SnapshotId {
		t.Fatalf("by source volume: %v, %v", byVol, err)
	}
	byID, err := d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: only.Snapshot.SnapshotId})
	if err != nil || len(byID.Entries) != 1 {
		t.Fatalf("by ID: %v, %v", byID, err)
	}
	none, err := d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: "snap-00000000000000000000"})
	if err != nil || len(none.Entries) != 0 {
		t.Fatalf("unknown ID: %v, %v", none, err)
	}
	seen := map[string]bool{}
	token := ""
	for pages := 0; ; pages++ {
		if pages > 4 {
			t.Fatal("paging does not end")
		}
		page, err := d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: 3, StartingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			seen[e.Snapshot.SnapshotId] = true
		}
		if token = page.NextToken; token == "" {
			break
		}
	}
	if len(seen) != 4 {
		t.Fatalf("paged through %d snapshots, want 4", len(seen))
	}
	_, err = d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: "bogus"})
	wantCode(t, err, codes.Aborted)
}
