package main

import (
	"os"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// faulty is a v1 BackupItemAction that misbehaves on ConfigMaps labelled
// faulty=crash (the process exits) or faulty=hang (the call never returns),
// to show a backup survives both.
type faulty struct{}

func (faulty) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"configmaps"}, LabelSelector: "faulty"}, nil
}

func (faulty) Execute(item runtime.Unstructured, _ *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	u := item.(*unstructured.Unstructured)
	switch u.GetLabels()["faulty"] {
	case "crash":
		os.Exit(2)
	case "hang":
		time.Sleep(time.Hour)
	}
	return u, nil, nil
}
