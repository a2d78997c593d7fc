// Command velerokopia backs up and restores a directory with Velero's own
// file-system backup code, as Velero's node agent drives it: the unified
// repository provider (pkg/repository/provider, over udmrepo/kopialib)
// creates or connects to the kopia repository of a backup storage location
// and volume namespace, and the kopia uploader provider
// (pkg/uploader/provider) runs the backup or the restore. Lifeboat's
// compatibility test (test/velerokopia in the main module) runs it against
// an S3 server to show that Lifeboat restores what Velero stores and the
// other way round.
//
//	velerokopia [store flags] backup -path DIR -pod POD -volume VOL [-claim PVC] [-tag k=v ...] [-pod-volume-tags=false]
//	velerokopia [store flags] restore -snapshot ID -target DIR
//
// With -pod-volume-tags=false and -claim, a backup is the one Velero
// v1.18's node agent makes for a PodVolumeBackup (its micro service passes
// no tags, and names the source after the claim when there is one), so a
// test playing the node agent's part stores what Velero's would.
//
// Each prints one JSON object on stdout. $HOME holds Velero's repository
// config files (Velero keeps them under $HOME/udmrepo).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/sirupsen/logrus"
	corev1api "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	repoprovider "github.com/vmware-tanzu/velero/pkg/repository/provider"
	"github.com/vmware-tanzu/velero/pkg/uploader"
	uploaderprovider "github.com/vmware-tanzu/velero/pkg/uploader/provider"
)

// The password Secret and BSL credential Secret as Velero names them; the
// stores below answer for them from flags.
const (
	passwordSecret = "velero-repo-credentials"
	passwordKey    = "repository-password"
	credSecret     = "cloud-credentials"
	credKey        = "cloud"
	// requester is what Velero's pod volume backups are made by.
	requester = "snapshot-pod-volume"
)

type storeFlags struct {
	s3URL, region, bucket, prefix, credentials, password, namespace, location string
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "velerokopia:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	var sf storeFlags
	fs := flag.NewFlagSet("velerokopia", flag.ContinueOnError)
	fs.StringVar(&sf.s3URL, "s3url", "", "the S3 server's URL (BSL config s3Url)")
	fs.StringVar(&sf.region, "region", "us-east-1", "BSL config region")
	fs.StringVar(&sf.bucket, "bucket", "", "the location's bucket")
	fs.StringVar(&sf.prefix, "prefix", "", "the location's prefix")
	fs.StringVar(&sf.credentials, "credentials", "", "an AWS shared-credentials file (the BSL's credential)")
	fs.StringVar(&sf.password, "password", "static-passw0rd", "the repository password (Secret velero-repo-credentials)")
	fs.StringVar(&sf.namespace, "namespace", "", "the volume namespace, whose repository is used")
	fs.StringVar(&sf.location, "location", "default", "the BSL's name")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("want a command: backup or restore")
	}
	log := logrus.New()
	log.SetOutput(os.Stderr)
	log.SetLevel(logrus.WarnLevel)
	ctx := context.Background()

	bsl, repo := sf.objects()
	getter, err := credentialGetter(sf)
	if err != nil {
		return err
	}
	// As Velero's repository controller (create or find the repository)
	// and node agent (connect, then open it for the uploader) do.
	rp := newUnifiedRepoProvider(getter, log)
	param := repoprovider.RepoParam{BackupLocation: bsl, BackupRepo: repo}
	if err := rp.PrepareRepo(ctx, param); err != nil {
		return fmt.Errorf("preparing the repository: %w", err)
	}
	if err := rp.ConnectToRepo(ctx, param); err != nil {
		return fmt.Errorf("connecting to the repository: %w", err)
	}
	up, err := newUploaderProvider(ctx, bsl, repo, getter, log)
	if err != nil {
		return fmt.Errorf("opening the uploader: %w", err)
	}
	defer up.Close(ctx)

	cmd, rest := fs.Arg(0), fs.Args()[1:]
	switch cmd {
	case "backup":
		return backup(ctx, up, sf, rest, out)
	case "restore":
		return restore(ctx, up, rest, out)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func (sf storeFlags) objects() (*velerov1api.BackupStorageLocation, *velerov1api.BackupRepository) {
	bsl := &velerov1api.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: sf.location},
		Spec: velerov1api.BackupStorageLocationSpec{
			Provider: "aws",
			Config:   map[string]string{"region": sf.region, "s3Url": sf.s3URL, "s3ForcePathStyle": "true"},
			StorageType: velerov1api.StorageType{ObjectStorage: &velerov1api.ObjectStorageLocation{
				Bucket: sf.bucket, Prefix: sf.prefix,
			}},
			Credential: &corev1api.SecretKeySelector{LocalObjectReference: corev1api.LocalObjectReference{Name: credSecret}, Key: credKey},
		},
	}
	repo := &velerov1api.BackupRepository{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "velero", Name: sf.namespace + "-" + sf.location + "-kopia",
			UID: types.UID("compat-" + sf.namespace + "-" + sf.location),
		},
		Spec: velerov1api.BackupRepositorySpec{
			VolumeNamespace: sf.namespace, BackupStorageLocation: sf.location, RepositoryType: "kopia",
		},
	}
	return bsl, repo
}

type progress struct{}

func (progress) UpdateProgress(*uploader.Progress) {}

func backup(ctx context.Context, up uploaderprovider.Provider, sf storeFlags, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	path := fs.String("path", "", "the directory to back up")
	pod := fs.String("pod", "", "the pod's name (snapshot source and tag)")
	volume := fs.String("volume", "", "the volume's name (snapshot source and tag)")
	claim := fs.String("claim", "", "the claim's name when the volume is a claim's (it names the snapshot source instead of the volume)")
	podVolumeTags := fs.Bool("pod-volume-tags", true, "tag the snapshot with pod, ns and volume; false: only -tag's and the uploader's own, as Velero v1.18's node agent")
	var tags tagFlags
	fs.Var(&tags, "tag", "k=v, a snapshot tag (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	t := map[string]string{}
	if *podVolumeTags {
		t = map[string]string{"pod": *pod, "ns": sf.namespace, "volume": *volume}
	}
	for k, v := range tags {
		t[k] = v
	}
	// The source Velero's pod volume backup gives (podvolume.GetRealSource):
	// namespace/pod/claim for a claim's volume, else namespace/pod/volume.
	last := *volume
	if *claim != "" {
		last = *claim
	}
	realSource := strings.Join([]string{sf.namespace, *pod, last}, "/")
	id, empty, total, incremental, err := up.RunBackup(ctx, *path, realSource, t, false, "", uploader.PersistentVolumeFilesystem, nil, progress{})
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(map[string]any{"snapshotID": id, "empty": empty, "totalBytes": total, "incrementalBytes": incremental})
}

func restore(ctx context.Context, up uploaderprovider.Provider, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	snap := fs.String("snapshot", "", "the snapshot ID")
	target := fs.String("target", "", "the directory to restore into")
	if err := fs.Parse(args); err != nil {
		return err
	}
	n, err := up.RunRestore(ctx, *snap, *target, uploader.PersistentVolumeFilesystem, nil, progress{})
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(map[string]any{"bytes": n})
}

type tagFlags map[string]string

func (t *tagFlags) String() string { return fmt.Sprint(map[string]string(*t)) }

func (t *tagFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("tag %q: want k=v", s)
	}
	if *t == nil {
		*t = map[string]string{}
	}
	(*t)[k] = v
	return nil
}

// fileStore answers Velero's credential file lookups with the file given.
type fileStore struct{ path string }

func (f fileStore) Path(sel *corev1api.SecretKeySelector) (string, error) {
	if sel.Name != credSecret || sel.Key != credKey {
		return "", fmt.Errorf("no file for secret %s key %s", sel.Name, sel.Key)
	}
	return f.path, nil
}

// secretStore answers Velero's Secret lookups: the repository password.
type secretStore struct{ password string }

func (s secretStore) Get(sel *corev1api.SecretKeySelector) (string, error) {
	if sel.Name != passwordSecret || sel.Key != passwordKey {
		return "", fmt.Errorf("no secret %s key %s", sel.Name, sel.Key)
	}
	return s.password, nil
}

// credentialGetter builds Velero's credentials.CredentialGetter. Velero
// keeps the type in an internal package, which no other module may
// import; its constructors take it, so it is made by reflection from their
// parameter type, its two exported fields set to the stores above.
func credentialGetter(sf storeFlags) (reflect.Value, error) {
	t := reflect.TypeOf(repoprovider.NewUnifiedRepoProvider).In(0)
	v := reflect.New(t).Elem()
	for name, val := range map[string]any{"FromFile": fileStore{sf.credentials}, "FromSecret": secretStore{sf.password}} {
		f := v.FieldByName(name)
		if !f.IsValid() || !reflect.TypeOf(val).Implements(f.Type()) {
			return reflect.Value{}, fmt.Errorf("velero's CredentialGetter has no field %s of a type %T implements", name, val)
		}
		f.Set(reflect.ValueOf(val))
	}
	return v, nil
}

func newUnifiedRepoProvider(getter reflect.Value, log logrus.FieldLogger) repoprovider.Provider {
	out := reflect.ValueOf(repoprovider.NewUnifiedRepoProvider).Call([]reflect.Value{
		getter, reflect.ValueOf("kopia"), reflect.ValueOf(log),
	})
	return out[0].Interface().(repoprovider.Provider)
}

func newUploaderProvider(ctx context.Context, bsl *velerov1api.BackupStorageLocation, repo *velerov1api.BackupRepository, getter reflect.Value, log logrus.FieldLogger) (uploaderprovider.Provider, error) {
	fn := reflect.ValueOf(uploaderprovider.NewUploaderProvider)
	ptr := reflect.New(getter.Type())
	ptr.Elem().Set(getter)
	sel := &corev1api.SecretKeySelector{LocalObjectReference: corev1api.LocalObjectReference{Name: passwordSecret}, Key: passwordKey}
	args := []reflect.Value{
		reflect.ValueOf(ctx),
		reflect.Zero(fn.Type().In(1)), // no cluster client: the kopia path uses none
		reflect.ValueOf(uploader.KopiaType),
		reflect.ValueOf(requester),
		reflect.ValueOf(""),
		reflect.ValueOf(bsl),
		reflect.ValueOf(repo),
		ptr,
		reflect.ValueOf(sel),
		reflect.ValueOf(log).Convert(fn.Type().In(9)),
	}
	out := fn.Call(args)
	if err, _ := out[1].Interface().(error); err != nil {
		return nil, err
	}
	return out[0].Interface().(uploaderprovider.Provider), nil
}
