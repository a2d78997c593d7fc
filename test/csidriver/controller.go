package main

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const (
	volumePrefix   = "vol-"
	snapshotPrefix = "snap-"
	// defaultCapacity is a volume's size when the claim asks for none;
	// nothing enforces sizes (the data is a plain directory).
	defaultCapacity = 1 << 30
)

// driver implements the CSI services over a state directory. One mutex
// serialises every change: the sidecars retry, and a create racing its own
// retry must not copy twice into one place.
type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer

	name, version, nodeID string
	state                 store
	mu                    sync.Mutex
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: d.version}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil // no Ready field: ready whenever it answers
}

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, c := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}},
		})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// checkCapabilities accepts filesystem volumes in any access mode (a
// directory can be shared); raw block is not something a directory can be.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume_capabilities: at least one is required")
	}
	for _, c := range caps {
		if c.GetBlock() != nil {
			return status.Error(codes.InvalidArgument, "volume_capabilities: block volumes are not supported, use a filesystem (mount) volume")
		}
		if c.GetMount() == nil {
			return status.Error(codes.InvalidArgument, "volume_capabilities: access_type mount is required")
		}
	}
	return nil
}

func (d *driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	want := volumeMeta{Name: req.GetName(), CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}
	if want.CapacityBytes == 0 {
		want.CapacityBytes = defaultCapacity
	}
	if limit := req.GetCapacityRange().GetLimitBytes(); limit != 0 && limit < want.CapacityBytes {
		if req.GetCapacityRange().GetRequiredBytes() != 0 {
			return nil, status.Errorf(codes.InvalidArgument, "capacity_range: limit_bytes %d is below required_bytes %d", limit, want.CapacityBytes)
		}
		want.CapacityBytes = limit
	}
	src := req.GetVolumeContentSource()
	copyFrom := ""
	switch {
	case src.GetSnapshot() != nil:
		want.SourceSnapshot = src.GetSnapshot().GetSnapshotId()
	case src.GetVolume() != nil:
		want.SourceVolume = src.GetVolume().GetVolumeId()
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	id := objectID(volumePrefix, want.Name)
	var have volumeMeta
	found, err := d.state.readMeta(volumesDir, id, &have)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if found {
		if have != want {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists as %+v, asked for %+v", want.Name, have, want)
		}
		return &csi.CreateVolumeResponse{Volume: volumeOf(id, have, src)}, nil
	}
	switch {
	case want.SourceSnapshot != "":
		var snap snapshotMeta
		if ok, err := d.readSnapshot(want.SourceSnapshot, &snap); err != nil {
			return nil, err
		} else if !ok {
			return nil, status.Errorf(codes.NotFound, "volume_content_source: snapshot %q not found", want.SourceSnapshot)
		}
		copyFrom = d.state.dir(snapshotsDir, want.SourceSnapshot) + "/" + dataDir
	case want.SourceVolume != "":
		var vol volumeMeta
		if ok, err := d.readVolume(want.SourceVolume, &vol); err != nil {
			return nil, err
		} else if !ok {
			return nil, status.Errorf(codes.NotFound, "volume_content_source: volume %q not found", want.SourceVolume)
		}
		copyFrom = d.state.dir(volumesDir, want.SourceVolume) + "/" + dataDir
	}
	if _, err := d.state.create(volumesDir, id, copyFrom, func(int64) any { return want }); err != nil {
		return nil, status.Errorf(codes.Internal, "creating volume %q: %v", want.Name, err)
	}
	return &csi.CreateVolumeResponse{Volume: volumeOf(id, want, src)}, nil
}

func volumeOf(id string, m volumeMeta, src *csi.VolumeContentSource) *csi.Volume {
	return &csi.Volume{VolumeId: id, CapacityBytes: m.CapacityBytes, ContentSource: src}
}

// readVolume and readSnapshot read an object by an ID a caller gave: one
// that is not the driver's is simply not found.
func (d *driver) readVolume(id string, m *volumeMeta) (bool, error) {
	if !validID(volumePrefix, id) {
		return false, nil
	}
	ok, err := d.state.readMeta(volumesDir, id, m)
	if err != nil {
		return false, status.Error(codes.Internal, err.Error())
	}
	return ok, nil
}

func (d *driver) readSnapshot(id string, m *snapshotMeta) (bool, error) {
	if !validID(snapshotPrefix, id) {
		return false, nil
	}
	ok, err := d.state.readMeta(snapshotsDir, id, m)
	if err != nil {
		return false, status.Error(codes.Internal, err.Error())
	}
	return ok, nil
}

func (d *driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if !validID(volumePrefix, id) {
		return &csi.DeleteVolumeResponse{}, nil // never ours: gone
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.state.remove(volumesDir, id); err != nil {
		return nil, status.Errorf(codes.Internal, "deleting volume %s: %v", id, err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume_capabilities: at least one is required")
	}
	var m volumeMeta
	if ok, err := d.readVolume(req.GetVolumeId(), &m); err != nil {
		return nil, err
	} else if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q not found", req.GetVolumeId())
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities(),
	}}, nil
}

func (d *driver) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if req.GetSourceVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "source_volume_id is required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	id := objectID(snapshotPrefix, req.GetName())
	var have snapshotMeta
	found, err := d.state.readMeta(snapshotsDir, id, &have)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if found {
		if have.SourceVolume != req.GetSourceVolumeId() {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %q exists of volume %s, asked for one of %s", req.GetName(), have.SourceVolume, req.GetSourceVolumeId())
		}
		return &csi.CreateSnapshotResponse{Snapshot: snapshotOf(id, have)}, nil
	}
	var vol volumeMeta
	if ok, err := d.readVolume(req.GetSourceVolumeId(), &vol); err != nil {
		return nil, err
	} else if !ok {
		return nil, status.Errorf(codes.NotFound, "source_volume_id: volume %q not found", req.GetSourceVolumeId())
	}
	m := snapshotMeta{Name: req.GetName(), SourceVolume: req.GetSourceVolumeId(), CreatedAt: time.Now().UTC()}
	_, err = d.state.create(snapshotsDir, id, d.state.dir(volumesDir, m.SourceVolume)+"/"+dataDir, func(size int64) any {
		m.SizeBytes = size
		return m
	})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "creating snapshot %q: %v", m.Name, err)
	}
	return &csi.CreateSnapshotResponse{Snapshot: snapshotOf(id, m)}, nil
}

func snapshotOf(id string, m snapshotMeta) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     id,
		SourceVolumeId: m.SourceVolume,
		SizeBytes:      m.SizeBytes,
		CreationTime:   timestamppb.New(m.CreatedAt),
		ReadyToUse:     true,
	}
}

func (d *driver) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	id := req.GetSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot_id is required")
	}
	if !validID(snapshotPrefix, id) {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.state.remove(snapshotsDir, id); err != nil {
		return nil, status.Errorf(codes.Internal, "deleting snapshot %s: %v", id, err)
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// ListSnapshots filters by snapshot_id or source_volume_id and pages with
// starting_token as the index of the next entry (the sidecar checks a
// pre-provisioned content's handle this way).
func (d *driver) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	if id := req.GetSnapshotId(); id != "" {
		ids = []string{id}
	} else {
		var err error
		if ids, err = d.state.list(snapshotsDir); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	var entries []*csi.ListSnapshotsResponse_Entry
	for _, id := range ids {
		var m snapshotMeta
		ok, err := d.readSnapshot(id, &m)
		if err != nil {
			return nil, err
		}
		if !ok || (req.GetSourceVolumeId() != "" && m.SourceVolume != req.GetSourceVolumeId()) {
			continue
		}
		entries = append(entries, &csi.ListSnapshotsResponse_Entry{Snapshot: snapshotOf(id, m)})
	}
	start := 0
	if tok := req.GetStartingToken(); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(entries) {
			return nil, status.Errorf(codes.Aborted, "starting_token %q is not one this driver gave", tok)
		}
		start = n
	}
	end := len(entries)
	if max := int(req.GetMaxEntries()); max > 0 && start+max < end {
		end = start + max
	}
	resp := &csi.ListSnapshotsResponse{Entries: entries[start:end]}
	if end < len(entries) {
		resp.NextToken = strconv.Itoa(end)
	}
	return resp, nil
}
