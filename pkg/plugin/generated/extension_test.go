package generated_test

// Lifeboat's own extension of the protocol (lifeboat.plugin.v1) is served
// next to Velero's services and called only by Lifeboat's host. Its method
// path and messages are a contract between Lifeboat's SDK and Lifeboat's
// host of different versions, so they are pinned here like Velero's.

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pluginv1 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/lifeboat/plugin/v1"
)

var extensionMessages = map[string][]string{
	"lifeboat.plugin.v1.ExecuteStreamRequest":  {"1 repeated .lifeboat.plugin.v1.BackupItemExecute calls"},
	"lifeboat.plugin.v1.ExecuteStreamResponse": {"1 repeated .lifeboat.plugin.v1.BackupItemResult results"},
	"lifeboat.plugin.v1.BackupItemExecute":     {"1 uint64 id", "2 string kind", "3 string plugin", "4 bytes item", "5 bytes backup"},
	"lifeboat.plugin.v1.BackupItemResult": {
		"1 uint64 id", "2 bytes item", "3 repeated .generated.ResourceIdentifier additionalItems", "4 string operationID",
		"5 repeated .generated.ResourceIdentifier postOperationItems", "6 .lifeboat.plugin.v1.CallError error",
	},
	"lifeboat.plugin.v1.CallError":                {"1 int32 code", "2 string message", "3 repeated .generated.StackFrame stack"},
	"lifeboat.plugin.v1.DeleteItemStreamRequest":  {"1 repeated .lifeboat.plugin.v1.DeleteItemExecute calls"},
	"lifeboat.plugin.v1.DeleteItemStreamResponse": {"1 repeated .lifeboat.plugin.v1.DeleteItemResult results"},
	"lifeboat.plugin.v1.DeleteItemExecute":        {"1 uint64 id", "2 string plugin", "3 bytes item", "4 bytes backup"},
	"lifeboat.plugin.v1.DeleteItemResult":         {"1 uint64 id", "2 .lifeboat.plugin.v1.CallError error"},
}

// The extension's services and their one method each.
var extensionServices = map[string]string{
	"lifeboat.plugin.v1.BackupItemActionStream": "ExecuteStream(stream .lifeboat.plugin.v1.ExecuteStreamRequest) returns (stream .lifeboat.plugin.v1.ExecuteStreamResponse)",
	"lifeboat.plugin.v1.DeleteItemActionStream": "ExecuteStream(stream .lifeboat.plugin.v1.DeleteItemStreamRequest) returns (stream .lifeboat.plugin.v1.DeleteItemStreamResponse)",
}

func TestLifeboatExtension(t *testing.T) {
	if got := pluginv1.BackupItemActionStream_ServiceDesc.ServiceName; got != "lifeboat.plugin.v1.BackupItemActionStream" {
		t.Errorf("service name %q", got)
	}
	if slices.Contains(protoPackages, "lifeboat.plugin.v1") {
		t.Error("the extension's package is listed among Velero's")
	}
	if got := pluginv1.DeleteItemActionStream_ServiceDesc.ServiceName; got != "lifeboat.plugin.v1.DeleteItemActionStream" {
		t.Errorf("service name %q", got)
	}
	for name, want := range extensionServices {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			t.Fatal(err)
		}
		var methods []string
		sd := d.(protoreflect.ServiceDescriptor)
		for i := range sd.Methods().Len() {
			methods = append(methods, methodSpec(sd.Methods().Get(i)))
		}
		compare(t, name+" methods", methods, []string{want})
	}
	files := 0
	protoregistry.GlobalFiles.RangeFilesByPackage("lifeboat.plugin.v1", func(fd protoreflect.FileDescriptor) bool {
		files++
		for i := range fd.Messages().Len() {
			md := fd.Messages().Get(i)
			want, ok := extensionMessages[string(md.FullName())]
			if !ok {
				t.Errorf("message %s is not in the table", md.FullName())
				continue
			}
			var got []string
			for j := range md.Fields().Len() {
				got = append(got, fieldSpec(md.Fields().Get(j)))
			}
			compare(t, string(md.FullName()), got, want)
		}
		return true
	})
	if files != 2 {
		t.Errorf("%d files in package lifeboat.plugin.v1, want 2 (one per stream)", files)
	}
}
