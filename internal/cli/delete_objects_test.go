package cli

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func objMeta(name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: v1.DefaultNamespace, Labels: labels}
}

func exists(t *testing.T, c client.Client, obj client.Object, name string) bool {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKey{Namespace: v1.DefaultNamespace, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func TestRestoreDelete(t *testing.T) {
	c := newFakeBuilder(t,
		&v1.Restore{ObjectMeta: objMeta("r1", map[string]string{"team": "a"})},
		&v1.Restore{ObjectMeta: objMeta("r2", map[string]string{"team": "b"})},
		&v1.Restore{ObjectMeta: objMeta("r3", map[string]string{"team": "a"})},
	).Build()
	f := newTestFactory(c)

	// Without --confirm and without a terminal: refused, nothing deleted.
	if _, _, err := run(t, f, "restore", "delete", "r1"); err == nil || !strings.Contains(err.Error(), "--confirm") {
		t.Errorf("unconfirmed: %v", err)
	}
	if !exists(t, c, &v1.Restore{}, "r1") {
		t.Fatal("r1 deleted without confirmation")
	}
	// Exactly one of names, --all, --selector.
	for _, args := range [][]string{{}, {"r1", "--all"}, {"--all", "--selector", "team=a"}} {
		if _, _, err := run(t, f, append([]string{"restore", "delete", "--confirm"}, args...)...); err == nil {
			t.Errorf("restore delete %v: no error", args)
		}
	}

	out, _, err := run(t, f, "restore", "delete", "--selector", "team=a", "--confirm")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `Request to delete restore "r1" submitted successfully.`) || !strings.Contains(out, `"r3"`) {
		t.Errorf("output:\n%s", out)
	}
	if exists(t, c, &v1.Restore{}, "r1") || exists(t, c, &v1.Restore{}, "r3") || !exists(t, c, &v1.Restore{}, "r2") {
		t.Error("--selector team=a deleted the wrong restores")
	}

	// A missing name is an error, and the others are deleted anyway.
	_, _, err = run(t, f, "restore", "delete", "nosuch", "r2", "--confirm")
	if err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("missing name: %v", err)
	}
	if exists(t, c, &v1.Restore{}, "r2") {
		t.Error("r2 not deleted next to a missing name")
	}
}

func TestScheduleDelete(t *testing.T) {
	c := newFakeBuilder(t,
		&v1.Schedule{ObjectMeta: objMeta("nightly", nil)},
		&v1.Schedule{ObjectMeta: objMeta("weekly", nil)},
	).Build()
	f := newTestFactory(c)
	out, _, err := run(t, f, "schedule", "delete", "nightly", "--confirm")
	if err != nil {
		t.Fatal(err)
	}
	if out != "Schedule deleted: nightly\n" {
		t.Errorf("output %q", out)
	}
	if exists(t, c, &v1.Schedule{}, "nightly") || !exists(t, c, &v1.Schedule{}, "weekly") {
		t.Error("wrong schedules deleted")
	}
	if _, _, err := run(t, f, "schedule", "delete", "--all", "--confirm"); err != nil {
		t.Fatal(err)
	}
	if exists(t, c, &v1.Schedule{}, "weekly") {
		t.Error("--all left weekly")
	}
	_, errOut, err := run(t, f, "schedule", "delete", "--all", "--confirm")
	if err != nil || !strings.Contains(errOut, "No schedules found") {
		t.Errorf("nothing to delete: err %v, stderr %q", err, errOut)
	}
}
