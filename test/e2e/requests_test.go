package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/buildinfo"
)

func TestServerStatusRequestIsAnswered(t *testing.T) {
	ssr := &v1.ServerStatusRequest{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("ssr")}}
	env.Create(t, ssr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ssr), ssr); err != nil {
			return false, err
		}
		return ssr.Status.Phase == v1.ServerStatusRequestPhaseProcessed, nil
	})
	if err != nil {
		t.Fatalf("not processed: %v (status %+v)", err, ssr.Status)
	}
	if ssr.Status.ServerVersion != buildinfo.ServerVersion(buildinfo.Version) || ssr.Status.ProcessedTimestamp == nil {
		t.Errorf("status %+v", ssr.Status)
	}
}

func TestDownloadRequestForAMissingBackupSaysWhy(t *testing.T) {
	dr := &v1.DownloadRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("dr")},
		Spec:       v1.DownloadRequestSpec{Target: v1.DownloadTarget{Kind: v1.DownloadTargetKindBackupLog, Name: "no-such-backup"}},
	}
	env.Create(t, dr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dr), dr); err != nil {
			return false, err
		}
		return dr.Status.Phase == v1.DownloadRequestPhaseProcessed, nil
	})
	if err != nil {
		t.Fatalf("not processed: %v", err)
	}
	if dr.Status.DownloadURL != "" || !hasCondition(dr.Status.Conditions, "Processed", metav1.ConditionFalse) {
		t.Errorf("status %+v: want no URL and Processed=False with the reason", dr.Status)
	}
}

func TestPluginGetListsBuiltInsAndPluginBinaries(t *testing.T) {
	out := mustLifeboat(t, "plugin", "get")
	for _, want := range []string{"ObjectStore", "lifeboat.io/filesystem", "velero.io/aws", "(built-in)", "BackupItemActionV2", "e2e.lifeboat.io/async", "asyncplugin"} {
		if !strings.Contains(out, want) {
			t.Errorf("plugin get lacks %q:\n%s", want, out)
		}
	}
}
