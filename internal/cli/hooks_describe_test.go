package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func TestDescribeShowsHooks(t *testing.T) {
	web, _ := sampleBackups()
	web.Spec.Hooks.Resources = []v1.BackupResourceHookSpec{{Name: "freeze", IncludedNamespaces: []string{"shop"},
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		PreHooks:      []v1.BackupResourceHook{{Exec: &v1.ExecHook{Container: "db", Command: []string{"fsfreeze", "--freeze", "/data"}, OnError: v1.HookErrorModeFail}}},
		PostHooks:     []v1.BackupResourceHook{{Exec: &v1.ExecHook{Command: []string{"fsfreeze", "--unfreeze", "/data"}}}}}}
	web.Status.HookStatus = &v1.HookStatus{HooksAttempted: 2, HooksFailed: 1}
	done, _ := sampleRestores()
	done.Spec.Hooks.Resources = []v1.RestoreResourceHookSpec{{Name: "seed", PostHooks: []v1.RestoreResourceHook{
		{Init: &v1.InitRestoreHook{InitContainers: []runtime.RawExtension{{Raw: []byte(`{"name":"seed","image":"busybox","command":["touch","/x"]}`)}}}},
		{Exec: &v1.ExecRestoreHook{Command: []string{"cat", "/x"}}},
	}}}
	done.Status.HookStatus = &v1.HookStatus{HooksAttempted: 1}
	c := newFakeBuilder(t, web, done).Build()

	out, _, err := run(t, newTestFactory(c), "backup", "describe", "web")
	if err != nil {
		t.Fatal(err)
	}
	got := squeeze(out)
	for _, want := range []string{
		"Hooks:\n Resources:\n freeze:\n Namespaces:\n Included: shop\n",
		"Label selector: app=db\n Pre Exec Hook:\n Container: db\n Command: fsfreeze --freeze /data\n On Error: Fail\n Timeout: 30s (default)\n",
		"Post Exec Hook:\n Container: <first container>\n Command: fsfreeze --unfreeze /data\n",
		"HooksAttempted: 2\nHooksFailed: 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("backup description lacks %q:\n%s", want, out)
		}
	}

	out, _, err = run(t, newTestFactory(c), "restore", "describe", done.Name)
	if err != nil {
		t.Fatal(err)
	}
	got = squeeze(out)
	for _, want := range []string{
		"Hooks:\n Resources:\n seed:\n",
		"Init Hook:\n Init Container: seed (image busybox): touch /x\n Exec Hook:\n Container: <first container>\n Command: cat /x\n",
		"HooksAttempted: 1\nHooksFailed: 0\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("restore description lacks %q:\n%s", want, out)
		}
	}
}

func TestScheduleDescribeShowsTemplateHooks(t *testing.T) {
	objs := sampleSchedules()
	nightly := objs[0].(*v1.Schedule)
	nightly.Spec.Template.Hooks.Resources = []v1.BackupResourceHookSpec{{Name: "sync",
		PreHooks: []v1.BackupResourceHook{{Exec: &v1.ExecHook{Command: []string{"/bin/sync"}, Timeout: metav1.Duration{Duration: time.Minute}}}}}}
	c := newFakeBuilder(t, objs...).Build()
	out, _, err := run(t, newTestFactory(c), "schedule", "describe", "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if want := " TTL: 168h0m0s\n Hooks:\n Resources:\n sync:\n"; !strings.Contains(squeeze(out), want) {
		t.Errorf("description lacks %q:\n%s", want, out)
	}
	if want := "Command: /bin/sync\n On Error: <none>\n Timeout: 1m0s\n"; !strings.Contains(squeeze(out), want) {
		t.Errorf("description lacks %q:\n%s", want, out)
	}
}
