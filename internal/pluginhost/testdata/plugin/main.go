// Command plugin is a plugin binary for the plugin host's tests. Its
// DeleteItemAction steers by item name so a test can make it crash once,
// hang, or fail; it counts calls in files under $TEST_STATE_DIR so the test
// can see what happened across process restarts.
package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

func main() {
	framework.NewServer().
		RegisterDeleteItemAction("hosttest.io/steer", func(*slog.Logger) (api.DeleteItemAction, error) { return steer{}, nil }).
		Serve()
}

type steer struct{}

func (steer) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }

func (steer) Execute(in *api.DeleteItemActionExecuteInput) error {
	name := in.Item.(*unstructured.Unstructured).GetName()
	state := os.Getenv("TEST_STATE_DIR")
	calls := filepath.Join(state, name)
	f, err := os.OpenFile(calls, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, _ = f.WriteString("x")
	_ = f.Close()
	data, _ := os.ReadFile(calls)
	switch name {
	case "crash-once":
		if len(data) == 1 {
			os.Exit(2)
		}
	case "crash-always":
		os.Exit(2)
	case "hang":
		time.Sleep(time.Hour)
	case "fail":
		return framework.Errorf("refusing %s", name)
	}
	return nil
}
