package framework_test

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/plugintest"
)

// cleanup is a DeleteItemAction: when a backup is deleted, it removes what
// was made for each ConfigMap of the backup outside it.
type cleanup struct{ log *slog.Logger }

func (c *cleanup) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"configmaps"}}, nil
}

func (c *cleanup) Execute(in *api.DeleteItemActionExecuteInput) error {
	u, ok := in.Item.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected item type %T", in.Item)
	}
	if u.GetName() == "locked" {
		return errors.New("the receipt of ConfigMap locked is held by another backup")
	}
	c.log.Info("removed the receipt", "configMap", u.GetNamespace()+"/"+u.GetName(), "backup", in.Backup.Name)
	return nil
}

// A plugin binary's main: register each plugin under its name, then serve
// them. Serve runs until the server ends the process; the plugin's logs go
// to the server's log.
func ExampleServer() {
	framework.NewServer().
		RegisterDeleteItemAction("example.io/cleanup", func(log *slog.Logger) (api.DeleteItemAction, error) {
			// Called once, on the server's first request for the plugin.
			return &cleanup{log: log}, nil
		}).
		Serve()
}

// Mistakes in the registrations are collected rather than panicking, so
// the Register calls chain; Serve refuses to start with any, and a test
// can ask Err.
func ExampleServer_Err() {
	s := framework.NewServer().
		RegisterDeleteItemAction("cleanup", func(log *slog.Logger) (api.DeleteItemAction, error) { return &cleanup{log: log}, nil }).
		RegisterDeleteItemAction("example.io/cleanup", func(log *slog.Logger) (api.DeleteItemAction, error) { return &cleanup{log: log}, nil }).
		RegisterDeleteItemAction("example.io/cleanup", func(log *slog.Logger) (api.DeleteItemAction, error) { return &cleanup{log: log}, nil })
	fmt.Println(s.Err())
	// Output:
	// registering DeleteItemAction plugin: plugin name "cleanup" must be <DNS-1123 subdomain>/<name>, e.g. example.io/my-plugin
	// registering DeleteItemAction plugin example.io/cleanup: the name is registered twice
}

// A plugin's test calls the plugin as the server will: package plugintest
// serves it in the test's process over the real plugin protocol and
// returns the server's client of it. The body below is a test function's
// (t is its *testing.T); see package plugintest.
func Example_test() {
	testCleanup := func(t *testing.T) {
		dia := plugintest.DeleteItemAction(t, "example.io/cleanup", &cleanup{log: slog.New(slog.DiscardHandler)})

		item := &unstructured.Unstructured{}
		item.SetAPIVersion("v1")
		item.SetKind("ConfigMap")
		item.SetNamespace("shop")
		item.SetName("locked")
		err := dia.Execute(&api.DeleteItemActionExecuteInput{Item: item, Backup: &v1.Backup{}})

		// The plugin's error, as the server gets it: the plugin and method
		// named, the plugin's message kept.
		var pe *framework.PluginError
		if !errors.As(err, &pe) || pe.Message() != "the receipt of ConfigMap locked is held by another backup" {
			t.Errorf("Execute: %v", err)
		}
	}
	_ = testCleanup
}
