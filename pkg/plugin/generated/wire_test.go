package generated_test

// These tests pin Lifeboat's plugin protocol to Velero's wire contract. The
// tables below were written from Velero's own .proto files (v1.18) in
// Velero's notation, not from our generated code; they are checked against
// the protobuf descriptors that the generated packages register, so a wrong
// proto package, service, method, streaming shape, message, field number,
// field name or field type fails here. The gRPC method path
// (/<package>.<Service>/<Method>) and the message encoding are all that a
// Velero plugin or host sees of us.

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
	biav2 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/backupitemaction/v2"
	ibav1 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/itemblockaction/v1"
	riav2 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/restoreitemaction/v2"
)

// services: full service name -> its methods, written as in a .proto file.
// Type names are fully qualified with a leading dot.
var services = map[string][]string{
	"generated.ObjectStore": {
		"Init(.generated.ObjectStoreInitRequest) returns (.generated.Empty)",
		"PutObject(stream .generated.PutObjectRequest) returns (.generated.Empty)",
		"ObjectExists(.generated.ObjectExistsRequest) returns (.generated.ObjectExistsResponse)",
		"GetObject(.generated.GetObjectRequest) returns (stream .generated.Bytes)",
		"ListCommonPrefixes(.generated.ListCommonPrefixesRequest) returns (.generated.ListCommonPrefixesResponse)",
		"ListObjects(.generated.ListObjectsRequest) returns (.generated.ListObjectsResponse)",
		"DeleteObject(.generated.DeleteObjectRequest) returns (.generated.Empty)",
		"CreateSignedURL(.generated.CreateSignedURLRequest) returns (.generated.CreateSignedURLResponse)",
	},
	"generated.VolumeSnapshotter": {
		"Init(.generated.VolumeSnapshotterInitRequest) returns (.generated.Empty)",
		"CreateVolumeFromSnapshot(.generated.CreateVolumeRequest) returns (.generated.CreateVolumeResponse)",
		"GetVolumeInfo(.generated.GetVolumeInfoRequest) returns (.generated.GetVolumeInfoResponse)",
		"CreateSnapshot(.generated.CreateSnapshotRequest) returns (.generated.CreateSnapshotResponse)",
		"DeleteSnapshot(.generated.DeleteSnapshotRequest) returns (.generated.Empty)",
		"GetVolumeID(.generated.GetVolumeIDRequest) returns (.generated.GetVolumeIDResponse)",
		"SetVolumeID(.generated.SetVolumeIDRequest) returns (.generated.SetVolumeIDResponse)",
	},
	"generated.BackupItemAction": {
		"AppliesTo(.generated.BackupItemActionAppliesToRequest) returns (.generated.BackupItemActionAppliesToResponse)",
		"Execute(.generated.ExecuteRequest) returns (.generated.ExecuteResponse)",
	},
	"v2.BackupItemAction": {
		"AppliesTo(.v2.BackupItemActionAppliesToRequest) returns (.v2.BackupItemActionAppliesToResponse)",
		"Execute(.v2.ExecuteRequest) returns (.v2.ExecuteResponse)",
		"Progress(.v2.BackupItemActionProgressRequest) returns (.v2.BackupItemActionProgressResponse)",
		"Cancel(.v2.BackupItemActionCancelRequest) returns (.google.protobuf.Empty)",
	},
	"generated.RestoreItemAction": {
		"AppliesTo(.generated.RestoreItemActionAppliesToRequest) returns (.generated.RestoreItemActionAppliesToResponse)",
		"Execute(.generated.RestoreItemActionExecuteRequest) returns (.generated.RestoreItemActionExecuteResponse)",
	},
	"v2.RestoreItemAction": {
		"AppliesTo(.v2.RestoreItemActionAppliesToRequest) returns (.v2.RestoreItemActionAppliesToResponse)",
		"Execute(.v2.RestoreItemActionExecuteRequest) returns (.v2.RestoreItemActionExecuteResponse)",
		"Progress(.v2.RestoreItemActionProgressRequest) returns (.v2.RestoreItemActionProgressResponse)",
		"Cancel(.v2.RestoreItemActionCancelRequest) returns (.google.protobuf.Empty)",
		"AreAdditionalItemsReady(.v2.RestoreItemActionItemsReadyRequest) returns (.v2.RestoreItemActionItemsReadyResponse)",
	},
	"generated.DeleteItemAction": {
		"AppliesTo(.generated.DeleteItemActionAppliesToRequest) returns (.generated.DeleteItemActionAppliesToResponse)",
		"Execute(.generated.DeleteItemActionExecuteRequest) returns (.generated.Empty)",
	},
	"v1.ItemBlockAction": {
		"AppliesTo(.v1.ItemBlockActionAppliesToRequest) returns (.v1.ItemBlockActionAppliesToResponse)",
		"GetRelatedItems(.v1.ItemBlockActionGetRelatedItemsRequest) returns (.v1.ItemBlockActionGetRelatedItemsResponse)",
	},
	"generated.PluginLister": {
		"ListPlugins(.generated.Empty) returns (.generated.ListPluginsResponse)",
	},
}

// messages: full message name -> its fields as "<number> <type> <name>".
// Every message of the proto packages generated, v1 and v2 is listed, so a
// message or field that Velero does not have fails too.
var messages = map[string][]string{
	// Shared.proto
	"generated.Empty": nil,
	"generated.Stack": {"1 repeated .generated.StackFrame frames"},
	"generated.StackFrame": {
		"1 string file", "2 int32 line", "3 string function",
	},
	"generated.ResourceIdentifier": {
		"1 string group", "2 string resource", "3 string namespace", "4 string name",
	},
	"generated.ResourceSelector": {
		"1 repeated string includedNamespaces", "2 repeated string excludedNamespaces",
		"3 repeated string includedResources", "4 repeated string excludedResources",
		"5 string selector",
	},
	"generated.OperationProgress": {
		"1 bool completed", "2 string err", "3 int64 nCompleted", "4 int64 nTotal",
		"5 string operationUnits", "6 string description",
		"7 .google.protobuf.Timestamp started", "8 .google.protobuf.Timestamp updated",
	},

	// ObjectStore.proto
	"generated.ObjectStoreInitRequest": {"1 string plugin", "2 map<string,string> config"},
	"generated.PutObjectRequest": {
		"1 string plugin", "2 string bucket", "3 string key", "4 bytes body",
	},
	"generated.ObjectExistsRequest":  {"1 string plugin", "2 string bucket", "3 string key"},
	"generated.ObjectExistsResponse": {"1 bool exists"},
	"generated.GetObjectRequest":     {"1 string plugin", "2 string bucket", "3 string key"},
	"generated.Bytes":                {"1 bytes data"},
	"generated.ListCommonPrefixesRequest": {
		"1 string plugin", "2 string bucket", "3 string delimiter", "4 string prefix",
	},
	"generated.ListCommonPrefixesResponse": {"1 repeated string prefixes"},
	"generated.ListObjectsRequest":         {"1 string plugin", "2 string bucket", "3 string prefix"},
	"generated.ListObjectsResponse":        {"1 repeated string keys"},
	"generated.DeleteObjectRequest":        {"1 string plugin", "2 string bucket", "3 string key"},
	"generated.CreateSignedURLRequest": {
		"1 string plugin", "2 string bucket", "3 string key", "4 int64 ttl",
	},
	"generated.CreateSignedURLResponse": {"1 string url"},

	// VolumeSnapshotter.proto
	"generated.VolumeSnapshotterInitRequest": {"1 string plugin", "2 map<string,string> config"},
	"generated.CreateVolumeRequest": {
		"1 string plugin", "2 string snapshotID", "3 string volumeType", "4 string volumeAZ", "5 int64 iops",
	},
	"generated.CreateVolumeResponse":   {"1 string volumeID"},
	"generated.GetVolumeInfoRequest":   {"1 string plugin", "2 string volumeID", "3 string volumeAZ"},
	"generated.GetVolumeInfoResponse":  {"1 string volumeType", "2 int64 iops"},
	"generated.CreateSnapshotRequest":  {"1 string plugin", "2 string volumeID", "3 string volumeAZ", "4 map<string,string> tags"},
	"generated.CreateSnapshotResponse": {"1 string snapshotID"},
	"generated.DeleteSnapshotRequest":  {"1 string plugin", "2 string snapshotID"},
	"generated.GetVolumeIDRequest":     {"1 string plugin", "2 bytes persistentVolume"},
	"generated.GetVolumeIDResponse":    {"1 string volumeID"},
	"generated.SetVolumeIDRequest":     {"1 string plugin", "2 bytes persistentVolume", "3 string volumeID"},
	"generated.SetVolumeIDResponse":    {"1 bytes persistentVolume"},

	// BackupItemAction.proto (v1)
	"generated.BackupItemActionAppliesToRequest":  {"1 string plugin"},
	"generated.BackupItemActionAppliesToResponse": {"1 .generated.ResourceSelector ResourceSelector"},
	"generated.ExecuteRequest":                    {"1 string plugin", "2 bytes item", "3 bytes backup"},
	"generated.ExecuteResponse":                   {"1 bytes item", "2 repeated .generated.ResourceIdentifier additionalItems"},

	// RestoreItemAction.proto (v1)
	"generated.RestoreItemActionAppliesToRequest":  {"1 string plugin"},
	"generated.RestoreItemActionAppliesToResponse": {"1 .generated.ResourceSelector ResourceSelector"},
	"generated.RestoreItemActionExecuteRequest": {
		"1 string plugin", "2 bytes item", "3 bytes restore", "4 bytes itemFromBackup",
	},
	"generated.RestoreItemActionExecuteResponse": {
		"1 bytes item", "2 repeated .generated.ResourceIdentifier additionalItems", "3 bool skipRestore",
	},

	// DeleteItemAction.proto
	"generated.DeleteItemActionAppliesToRequest":  {"1 string plugin"},
	"generated.DeleteItemActionAppliesToResponse": {"1 .generated.ResourceSelector ResourceSelector"},
	"generated.DeleteItemActionExecuteRequest":    {"1 string plugin", "2 bytes item", "3 bytes backup"},

	// PluginLister.proto
	"generated.ListPluginsResponse": {"1 repeated .generated.PluginIdentifier plugins"},
	"generated.PluginIdentifier":    {"1 string command", "2 string kind", "3 string name"},

	// backupitemaction/v2/BackupItemAction.proto
	"v2.BackupItemActionAppliesToRequest":  {"1 string plugin"},
	"v2.BackupItemActionAppliesToResponse": {"1 .generated.ResourceSelector ResourceSelector"},
	"v2.ExecuteRequest":                    {"1 string plugin", "2 bytes item", "3 bytes backup"},
	"v2.ExecuteResponse": {
		"1 bytes item", "2 repeated .generated.ResourceIdentifier additionalItems",
		"3 string operationID", "4 repeated .generated.ResourceIdentifier postOperationItems",
	},
	"v2.BackupItemActionProgressRequest":  {"1 string plugin", "2 string operationID", "3 bytes backup"},
	"v2.BackupItemActionProgressResponse": {"1 .generated.OperationProgress progress"},
	"v2.BackupItemActionCancelRequest":    {"1 string plugin", "2 string operationID", "3 bytes backup"},

	// restoreitemaction/v2/RestoreItemAction.proto
	"v2.RestoreItemActionAppliesToRequest":  {"1 string plugin"},
	"v2.RestoreItemActionAppliesToResponse": {"1 .generated.ResourceSelector ResourceSelector"},
	"v2.RestoreItemActionExecuteRequest": {
		"1 string plugin", "2 bytes item", "3 bytes restore", "4 bytes itemFromBackup",
	},
	"v2.RestoreItemActionExecuteResponse": {
		"1 bytes item", "2 repeated .generated.ResourceIdentifier additionalItems", "3 bool skipRestore",
		"4 string operationID", "5 bool waitForAdditionalItems",
		"6 .google.protobuf.Duration additionalItemsReadyTimeout",
	},
	"v2.RestoreItemActionProgressRequest":  {"1 string plugin", "2 string operationID", "3 bytes restore"},
	"v2.RestoreItemActionProgressResponse": {"1 .generated.OperationProgress progress"},
	"v2.RestoreItemActionCancelRequest":    {"1 string plugin", "2 string operationID", "3 bytes restore"},
	"v2.RestoreItemActionItemsReadyRequest": {
		"1 string plugin", "2 bytes restore", "3 repeated .generated.ResourceIdentifier additionalItems",
	},
	"v2.RestoreItemActionItemsReadyResponse": {"1 bool ready"},

	// itemblockaction/v1/ItemBlockAction.proto
	"v1.ItemBlockActionAppliesToRequest":  {"1 string plugin"},
	"v1.ItemBlockActionAppliesToResponse": {"1 .generated.ResourceSelector ResourceSelector"},
	"v1.ItemBlockActionGetRelatedItemsRequest": {
		"1 string plugin", "2 bytes item", "3 bytes backup",
	},
	"v1.ItemBlockActionGetRelatedItemsResponse": {"1 repeated .generated.ResourceIdentifier relatedItems"},
}

// protoPackages are the proto packages of the protocol.
var protoPackages = []protoreflect.FullName{"generated", "v1", "v2"}

func TestServices(t *testing.T) {
	for name, want := range services {
		t.Run(name, func(t *testing.T) {
			d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
			if err != nil {
				t.Fatalf("service not registered: %v", err)
			}
			sd, ok := d.(protoreflect.ServiceDescriptor)
			if !ok {
				t.Fatalf("%s is a %T, not a service", name, d)
			}
			var got []string
			for i := range sd.Methods().Len() {
				got = append(got, methodSpec(sd.Methods().Get(i)))
			}
			compare(t, "methods", got, want)
		})
	}
}

func TestMessages(t *testing.T) {
	for name, want := range messages {
		t.Run(name, func(t *testing.T) {
			d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
			if err != nil {
				t.Fatalf("message not registered: %v", err)
			}
			md, ok := d.(protoreflect.MessageDescriptor)
			if !ok {
				t.Fatalf("%s is a %T, not a message", name, d)
			}
			var got []string
			for i := range md.Fields().Len() {
				fd := md.Fields().Get(i)
				got = append(got, fieldSpec(fd))
				if fd.HasPresence() && fd.Kind() != protoreflect.MessageKind {
					t.Errorf("field %s has explicit presence (proto3 optional?); Velero's does not", fd.Name())
				}
			}
			compare(t, "fields", got, want)
			if n := md.Oneofs().Len(); n != 0 {
				t.Errorf("%d oneofs; Velero's message has none", n)
			}
			for i := range md.Messages().Len() {
				if nested := md.Messages().Get(i); !nested.IsMapEntry() {
					t.Errorf("nested message %s; Velero's has none", nested.FullName())
				}
			}
		})
	}
}

// TestNothingExtra fails on a service, message or enum in the protocol's
// packages that the tables above do not know, and on a package mix-up.
func TestNothingExtra(t *testing.T) {
	files := 0
	for _, pkg := range protoPackages {
		protoregistry.GlobalFiles.RangeFilesByPackage(pkg, func(fd protoreflect.FileDescriptor) bool {
			files++
			if fd.Syntax() != protoreflect.Proto3 {
				t.Errorf("%s: syntax %v, want proto3", fd.Path(), fd.Syntax())
			}
			for i := range fd.Services().Len() {
				if s := fd.Services().Get(i).FullName(); services[string(s)] == nil {
					t.Errorf("%s: service %s is not in Velero's protocol", fd.Path(), s)
				}
			}
			for i := range fd.Messages().Len() {
				if m := fd.Messages().Get(i).FullName(); !hasKey(messages, string(m)) {
					t.Errorf("%s: message %s is not in Velero's protocol", fd.Path(), m)
				}
			}
			if fd.Enums().Len() != 0 || fd.Extensions().Len() != 0 {
				t.Errorf("%s: enums or extensions; Velero's protocol has none", fd.Path())
			}
			return true
		})
	}
	// shared, object store, volume snapshotter, BIA, RIA, DIA, lister; BIA v2,
	// RIA v2; IBA v1.
	if files != 10 {
		t.Errorf("found %d proto files in packages %v, want 10", files, protoPackages)
	}
}

// TestGRPCServiceDescs checks what grpc-go actually routes on: the service
// name in each generated ServiceDesc and, per method, unary or the direction
// of streaming. They must agree with the table.
func TestGRPCServiceDescs(t *testing.T) {
	descs := []*grpc.ServiceDesc{
		&generated.ObjectStore_ServiceDesc,
		&generated.VolumeSnapshotter_ServiceDesc,
		&generated.BackupItemAction_ServiceDesc,
		&generated.RestoreItemAction_ServiceDesc,
		&generated.DeleteItemAction_ServiceDesc,
		&generated.PluginLister_ServiceDesc,
		&biav2.BackupItemAction_ServiceDesc,
		&riav2.RestoreItemAction_ServiceDesc,
		&ibav1.ItemBlockAction_ServiceDesc,
	}
	seen := map[string]bool{}
	for _, sd := range descs {
		want, ok := services[sd.ServiceName]
		if !ok {
			t.Errorf("ServiceDesc %q is not a service of Velero's protocol", sd.ServiceName)
			continue
		}
		seen[sd.ServiceName] = true
		var got, wantShapes []string
		for _, m := range sd.Methods {
			got = append(got, m.MethodName+" unary")
		}
		for _, s := range sd.Streams {
			got = append(got, fmt.Sprintf("%s %s", s.StreamName, shape(s.ClientStreams, s.ServerStreams)))
		}
		for _, spec := range want {
			name, rest, _ := strings.Cut(spec, "(")
			in, out, _ := strings.Cut(rest, " returns ")
			wantShapes = append(wantShapes, fmt.Sprintf("%s %s", name,
				shape(strings.HasPrefix(in, "stream "), strings.HasPrefix(out, "(stream "))))
		}
		compare(t, sd.ServiceName, got, wantShapes)
	}
	if len(seen) != len(services) {
		t.Errorf("ServiceDescs cover %d of %d services", len(seen), len(services))
	}
	// The paths on the wire, as Velero's stubs call them.
	for got, want := range map[string]string{
		generated.ObjectStore_PutObject_FullMethodName:                 "/generated.ObjectStore/PutObject",
		generated.DeleteItemAction_Execute_FullMethodName:              "/generated.DeleteItemAction/Execute",
		generated.PluginLister_ListPlugins_FullMethodName:              "/generated.PluginLister/ListPlugins",
		biav2.BackupItemAction_Progress_FullMethodName:                 "/v2.BackupItemAction/Progress",
		riav2.RestoreItemAction_AreAdditionalItemsReady_FullMethodName: "/v2.RestoreItemAction/AreAdditionalItemsReady",
		ibav1.ItemBlockAction_GetRelatedItems_FullMethodName:           "/v1.ItemBlockAction/GetRelatedItems",
	} {
		if got != want {
			t.Errorf("method path %q, want %q", got, want)
		}
	}
}

// TestEncoding pins a few messages byte for byte, as any protobuf
// implementation must encode them from Velero's definitions.
func TestEncoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  proto.Message
		hex  string
	}{{
		name: "DeleteItemActionExecuteRequest",
		msg:  &generated.DeleteItemActionExecuteRequest{Plugin: "p", Item: []byte("{}"), Backup: []byte("{}")},
		hex:  "0a0170" + "12027b7d" + "1a027b7d",
	}, {
		name: "PutObjectRequest chunk",
		msg:  &generated.PutObjectRequest{Plugin: "p", Bucket: "b", Key: "k", Body: []byte("x")},
		hex:  "0a0170" + "120162" + "1a016b" + "220178",
	}, {
		name: "ListCommonPrefixesRequest",
		msg:  &generated.ListCommonPrefixesRequest{Plugin: "p", Bucket: "b", Delimiter: "/", Prefix: "x"},
		hex:  "0a0170" + "120162" + "1a012f" + "220178",
	}, {
		name: "OperationProgress",
		msg: &generated.OperationProgress{
			Completed: true, Err: "e", NCompleted: 3, NTotal: 4, OperationUnits: "u", Description: "d",
			Started: &timestamppb.Timestamp{Seconds: 1}, Updated: &timestamppb.Timestamp{Seconds: 2},
		},
		hex: "0801" + "120165" + "1803" + "2004" + "2a0175" + "320164" + "3a020801" + "42020802",
	}, {
		name: "RestoreItemActionExecuteResponse v2",
		msg: &riav2.RestoreItemActionExecuteResponse{
			Item:                        []byte("{}"),
			AdditionalItems:             []*generated.ResourceIdentifier{{Group: "g", Resource: "r", Namespace: "n", Name: "x"}},
			SkipRestore:                 true,
			OperationID:                 "o",
			WaitForAdditionalItems:      true,
			AdditionalItemsReadyTimeout: durationpb.New(60_000_000_000),
		},
		hex: "0a027b7d" + "120c" + "0a0167" + "120172" + "1a016e" + "220178" + "1801" + "22016f" + "2801" + "3202083c",
	}, {
		name: "ExecuteResponse v2",
		msg: &biav2.ExecuteResponse{
			Item:               []byte("{}"),
			AdditionalItems:    []*generated.ResourceIdentifier{{Name: "a"}},
			OperationID:        "o",
			PostOperationItems: []*generated.ResourceIdentifier{{Name: "b"}},
		},
		hex: "0a027b7d" + "1203220161" + "1a016f" + "2203220162",
	}, {
		name: "ListPluginsResponse",
		msg: &generated.ListPluginsResponse{Plugins: []*generated.PluginIdentifier{
			{Command: "c", Kind: "DeleteItemAction", Name: "n"},
		}},
		hex: "0a18" + "0a0163" + "1210" + hex.EncodeToString([]byte("DeleteItemAction")) + "1a016e",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(b); got != tc.hex {
				t.Errorf("encoded\n got %s\nwant %s", got, tc.hex)
			}
		})
	}
}

// TestStackDetail: plugin errors travel as a gRPC status whose details hold
// a generated.Stack; the Any's type URL carries the full name.
func TestStackDetail(t *testing.T) {
	st, err := status.New(codes.Unknown, "boom").WithDetails(&generated.Stack{
		Frames: []*generated.StackFrame{{File: "f.go", Line: 7, Function: "main.f"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Proto().GetDetails()[0].GetTypeUrl(); got != "type.googleapis.com/generated.Stack" {
		t.Errorf("type URL %q", got)
	}
	back := status.Convert(st.Err())
	details := back.Details()
	if len(details) != 1 {
		t.Fatalf("details %v", details)
	}
	stack, ok := details[0].(*generated.Stack)
	if !ok || stack.GetFrames()[0].GetLine() != 7 {
		t.Errorf("detail %#v", details[0])
	}
}

func methodSpec(m protoreflect.MethodDescriptor) string {
	stream := func(b bool) string {
		if b {
			return "stream "
		}
		return ""
	}
	return fmt.Sprintf("%s(%s.%s) returns (%s.%s)", m.Name(),
		stream(m.IsStreamingClient()), m.Input().FullName(),
		stream(m.IsStreamingServer()), m.Output().FullName())
}

func fieldSpec(fd protoreflect.FieldDescriptor) string {
	var typ string
	switch {
	case fd.IsMap():
		typ = fmt.Sprintf("map<%s,%s>", typeName(fd.MapKey()), typeName(fd.MapValue()))
	case fd.IsList():
		typ = "repeated " + typeName(fd)
	default:
		typ = typeName(fd)
	}
	return fmt.Sprintf("%d %s %s", fd.Number(), typ, fd.Name())
}

func typeName(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return "." + string(fd.Message().FullName())
	case protoreflect.EnumKind:
		return "." + string(fd.Enum().FullName())
	default:
		return fd.Kind().String()
	}
}

func shape(client, server bool) string {
	switch {
	case client && server:
		return "bidi-stream"
	case client:
		return "client-stream"
	case server:
		return "server-stream"
	default:
		return "unary"
	}
}

// compare reports the difference between two sets of specs.
func compare(t *testing.T, what string, got, want []string) {
	t.Helper()
	got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("%s: unexpected %q", what, g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s: missing %q", what, w)
		}
	}
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}
