package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/config/crd"
	"github.com/lifeboat-io/lifeboat/internal/install"
)

type uninstallOptions struct {
	force    bool
	keepCRDs bool
	timeout  time.Duration
}

func newUninstallCommand(f *Factory) *cobra.Command {
	o := &uninstallOptions{}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what `lifeboat install` created; never the backups in storage",
		Long: "Uninstall removes the server install created in the namespace (-n): first its Deployment and the node\n" +
			"agent's DaemonSet, waiting for their pods to go, then their RBAC, service accounts and the credentials\n" +
			"Secret. Objects that install did not make (no label app.kubernetes.io/managed-by=lifeboat), such as\n" +
			"Velero's, are left alone.\n\n" +
			"It then asks whether to remove the velero.io objects of the namespace (Backups, Restores, Schedules,\n" +
			"locations...) and the velero.io CRDs (kept while another namespace still has velero.io objects),\n" +
			"and the namespace if install created it. --force answers yes, --keep-crds answers no; without a\n" +
			"terminal one of them is required.\n\n" +
			"Backup data in object storage is never deleted: the server is gone before any Backup object is\n" +
			"removed, Backups lose the lifeboat.io/backup-data finalizer first so that nothing acts on their\n" +
			"deletion, and no DeleteBackupRequest is created. A later install finds the backups again.",
		Example: `  # Remove the server, keep the CRDs, the backups' objects and the locations
  lifeboat uninstall --keep-crds

  # Remove everything install made, without asking
  lifeboat uninstall -n backup-system --force`,
		Args: cobra.NoArgs,
		RunE: runE(f, func(cmd *cobra.Command, _ []string) error {
			if o.force && o.keepCRDs {
				return errors.New("--force and --keep-crds cannot be used together: --force removes the CRDs, --keep-crds keeps them")
			}
			return o.run(cmd, f)
		}),
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "remove the velero.io objects, the CRDs and a namespace install created without asking")
	cmd.Flags().BoolVar(&o.keepCRDs, "keep-crds", false, "remove only the server, its RBAC and Secret; keep the CRDs, the velero.io objects and the namespace")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the server's pods and the velero.io objects to go")
	return cmd
}

func (o *uninstallOptions) run(cmd *cobra.Command, f *Factory) error {
	ctx, out, ns := cmd.Context(), cmd.OutOrStdout(), f.Namespace
	c, err := f.Client()
	if err != nil {
		return err
	}
	// The question is asked before anything is removed, so that a refusal
	// (no terminal) leaves the cluster as it was.
	removeCRDs := o.force
	if !o.force && !o.keepCRDs {
		if !f.inputIsTerminal(cmd.InOrStdin()) {
			return errors.New("uninstall would ask whether to remove the velero.io CRDs and objects, and there is no terminal to ask on: " +
				"give --force to remove them too, or --keep-crds to keep them")
		}
		removeCRDs, err = askYesNo(cmd.InOrStdin(), cmd.ErrOrStderr(), fmt.Sprintf(
			"Remove the velero.io objects of namespace %q (Backups, Restores, Schedules, locations...) and the velero.io CRDs too?\n"+
				"Backup data in storage is kept either way. [y/N] ", ns))
		if err != nil {
			return err
		}
	}
	deadline := time.Now().Add(o.timeout)
	u := &uninstaller{c: c, out: out, ns: ns, deadline: deadline, poll: f.pollInterval()}

	if err := u.removeServer(ctx); err != nil {
		return err
	}
	for _, obj := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: install.ClusterRoleName(ns)}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: install.AggregatedClusterRoleName(ns)}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: install.ClusterRoleName(ns)}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: install.AggregatedClusterRoleName(ns)}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: install.NamespaceRoleName, Namespace: ns}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: install.NamespaceRoleName, Namespace: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: install.ServerName, Namespace: ns}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: install.NodeAgentClusterRoleName(ns)}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: install.NodeAgentClusterRoleName(ns)}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: install.NodeAgentRoleName, Namespace: ns}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: install.NodeAgentRoleName, Namespace: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: install.NodeAgentName, Namespace: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: install.CredentialsSecret, Namespace: ns}},
	} {
		if _, err := u.deleteIfInstalls(ctx, obj); err != nil {
			return err
		}
	}
	if !removeCRDs {
		_, err := fmt.Fprintf(out, "\nThe server is uninstalled from namespace %q; the velero.io CRDs and objects stay.\n", ns)
		return err
	}
	if err := u.removeObjects(ctx); err != nil {
		return err
	}
	if err := u.removeCRDs(ctx); err != nil {
		return err
	}
	if err := u.removeNamespace(ctx); err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, "\nLifeboat is uninstalled. Backup data in storage was not touched.")
	return err
}

// askYesNo asks a yes/no question; anything but y or yes is no.
func askYesNo(in io.Reader, out io.Writer, question string) (bool, error) {
	if _, err := fmt.Fprint(out, question); err != nil {
		return false, err
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("reading the answer: %w", err)
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}

func (f *Factory) inputIsTerminal(r io.Reader) bool {
	if f.IsTerminalInput != nil {
		return f.IsTerminalInput(r)
	}
	file, ok := r.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

type uninstaller struct {
	c        client.Client
	out      io.Writer
	ns       string
	deadline time.Time
	poll     time.Duration
}

func kindOf(obj client.Object) string {
	t := fmt.Sprintf("%T", obj)
	return t[strings.LastIndex(t, ".")+1:]
}

func ref(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return kindOf(obj) + "/" + obj.GetName()
	}
	return kindOf(obj) + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

// deleteIfInstalls deletes obj when install made it; reports whether it
// was there and install's.
func (u *uninstaller) deleteIfInstalls(ctx context.Context, obj client.Object) (bool, error) {
	cctx, cancel := callCtx(ctx)
	defer cancel()
	err := u.c.Get(cctx, client.ObjectKeyFromObject(obj), obj)
	switch {
	case apierrors.IsNotFound(err):
		_, err = fmt.Fprintf(u.out, "%s: not found\n", ref(obj))
		return false, err
	case err != nil:
		return false, fmt.Errorf("reading %s: %w", ref(obj), err)
	case !install.ManagedBy(obj):
		_, err = fmt.Fprintf(u.out, "%s: not made by lifeboat install (no label app.kubernetes.io/managed-by=lifeboat), left alone\n", ref(obj))
		return false, err
	}
	uid := obj.GetUID()
	if err := u.c.Delete(cctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("deleting %s: %w", ref(obj), err)
	}
	_, err = fmt.Fprintf(u.out, "%s: deleted\n", ref(obj))
	return true, err
}

// removeServer deletes the server's Deployment and waits until no server
// pod is left and no server holds the leader Lease: nothing may act on
// the Backups whose finalizers are removed next.
func (u *uninstaller) removeServer(ctx context.Context) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: install.ServerName, Namespace: u.ns}}
	if _, err := u.deleteIfInstalls(ctx, d); err != nil {
		return err
	}
	// The node agent's pods carry the same labels and write to the same
	// objects: they go too.
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: install.NodeAgentName, Namespace: u.ns}}
	if _, err := u.deleteIfInstalls(ctx, ds); err != nil {
		return err
	}
	for {
		pods := &corev1.PodList{}
		cctx, cancel := callCtx(ctx)
		err := u.c.List(cctx, pods, client.InNamespace(u.ns), client.MatchingLabels(map[string]string{"app.kubernetes.io/name": "lifeboat"}))
		cancel()
		if err != nil {
			return fmt.Errorf("listing the server's pods in %s: %w", u.ns, err)
		}
		if len(pods.Items) == 0 {
			return nil
		}
		if time.Now().After(u.deadline) {
			return fmt.Errorf("%d server pods of namespace %s are still there after --timeout (%s first); nothing else was removed: "+
				"see `kubectl -n %s get pods -l app.kubernetes.io/name=lifeboat`, then run uninstall again", len(pods.Items), u.ns, pods.Items[0].Name, u.ns)
		}
		if err := sleep(ctx, u.poll); err != nil {
			return err
		}
	}
}

// serverHoldsLease says which server, if any, still acts on the namespace:
// a process started by hand holds the same Lease as the Deployment's pods.
func (u *uninstaller) serverHoldsLease(ctx context.Context) (string, error) {
	lease := &coordinationv1.Lease{}
	cctx, cancel := callCtx(ctx)
	defer cancel()
	err := u.c.Get(cctx, client.ObjectKey{Namespace: u.ns, Name: install.LeaseName}, lease)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading Lease %s/%s: %w", u.ns, install.LeaseName, err)
	}
	s := lease.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return "", nil
	}
	if time.Since(s.RenewTime.Time) > time.Duration(*s.LeaseDurationSeconds)*time.Second {
		return "", nil
	}
	return *s.HolderIdentity, nil
}

// veleroKinds are the velero.io kinds install's CRDs serve.
func veleroKinds() ([]schema.GroupVersionKind, []string, error) {
	crds, err := crd.All()
	if err != nil {
		return nil, nil, fmt.Errorf("loading the embedded CRDs: %w", err)
	}
	var kinds []schema.GroupVersionKind
	var names []string
	for _, c := range crds {
		names = append(names, c.Name)
		for _, v := range c.Spec.Versions {
			if v.Storage {
				kinds = append(kinds, schema.GroupVersionKind{Group: c.Spec.Group, Version: v.Name, Kind: c.Spec.Names.Kind})
			}
		}
	}
	return kinds, names, nil
}

// removeObjects deletes the namespace's velero.io objects, Backups
// stripped of the finalizer first so that their deletion deletes nothing
// in storage.
func (u *uninstaller) removeObjects(ctx context.Context) error {
	for {
		holder, err := u.serverHoldsLease(ctx)
		if err != nil {
			return err
		}
		if holder == "" {
			break
		}
		if time.Now().After(u.deadline) {
			return fmt.Errorf("a Lifeboat server (%s) still holds Lease %s/%s, so it may act on Backups being deleted; "+
				"stop it (a `lifeboat server` process, or another Deployment) and run uninstall again: nothing of the velero.io objects was removed",
				holder, u.ns, install.LeaseName)
		}
		if err := sleep(ctx, u.poll); err != nil {
			return err
		}
	}
	kinds, _, err := veleroKinds()
	if err != nil {
		return err
	}
	if err := u.dropBackupFinalizers(ctx); err != nil {
		return err
	}
	for _, gvk := range kinds {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		cctx, cancel := callCtx(ctx)
		err := u.c.DeleteAllOf(cctx, obj, client.InNamespace(u.ns))
		cancel()
		if err != nil && !apierrors.IsNotFound(err) && !isCRDMissing(err) {
			return fmt.Errorf("deleting the %s objects of %s: %w", gvk.Kind, u.ns, err)
		}
	}
	for {
		left, err := u.countObjects(ctx, kinds, client.InNamespace(u.ns))
		if err != nil {
			return err
		}
		if len(left) == 0 {
			_, err := fmt.Fprintf(u.out, "velero.io objects of namespace %s: deleted\n", u.ns)
			return err
		}
		if time.Now().After(u.deadline) {
			return fmt.Errorf("velero.io objects of namespace %s are still there after --timeout, held by finalizers of another tool: %s",
				u.ns, strings.Join(left, ", "))
		}
		if err := sleep(ctx, u.poll); err != nil {
			return err
		}
	}
}

// dropBackupFinalizers removes v1.BackupFinalizer from every Backup of
// the namespace: with the server gone nothing would remove it, and with
// it the deletion of a Backup object would wait forever.
func (u *uninstaller) dropBackupFinalizers(ctx context.Context) error {
	list := &v1.BackupList{}
	cctx, cancel := callCtx(ctx)
	err := u.c.List(cctx, list, client.InNamespace(u.ns))
	cancel()
	if isCRDMissing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing the Backups of %s: %w", u.ns, err)
	}
	n := 0
	for i := range list.Items {
		b := &list.Items[i]
		if !slices.Contains(b.Finalizers, v1.BackupFinalizer) {
			continue
		}
		orig := b.DeepCopy()
		b.Finalizers = slices.DeleteFunc(b.Finalizers, func(s string) bool { return s == v1.BackupFinalizer })
		cctx, cancel := callCtx(ctx)
		err := u.c.Patch(cctx, b, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing finalizer %s from Backup %s/%s: %w", v1.BackupFinalizer, u.ns, b.Name, err)
		}
		n++
	}
	if n > 0 {
		_, err = fmt.Fprintf(u.out, "finalizer %s removed from %d Backups (their data stays in storage)\n", v1.BackupFinalizer, n)
	}
	return err
}

// countObjects names the velero.io objects left (with their finalizers).
func (u *uninstaller) countObjects(ctx context.Context, kinds []schema.GroupVersionKind, opts ...client.ListOption) ([]string, error) {
	var left []string
	for _, gvk := range kinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		cctx, cancel := callCtx(ctx)
		err := u.c.List(cctx, list, opts...)
		cancel()
		if isCRDMissing(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s objects: %w", gvk.Kind, err)
		}
		for _, item := range list.Items {
			s := gvk.Kind + " " + item.Namespace + "/" + item.Name
			if len(item.Finalizers) > 0 {
				s += " (finalizers " + strings.Join(item.Finalizers, ",") + ")"
			}
			left = append(left, s)
		}
	}
	return left, nil
}

// removeCRDs deletes install's CRDs unless another namespace still has
// velero.io objects: deleting a CRD deletes its objects everywhere.
func (u *uninstaller) removeCRDs(ctx context.Context) error {
	kinds, names, err := veleroKinds()
	if err != nil {
		return err
	}
	left, err := u.countObjects(ctx, kinds)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		_, err := fmt.Fprintf(u.out, "velero.io CRDs: kept, since other namespaces still have velero.io objects (%d, such as %s)\n", len(left), left[0])
		return err
	}
	for _, name := range names {
		obj := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		cctx, cancel := callCtx(ctx)
		err := u.c.Delete(cctx, obj)
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(u.out, "CustomResourceDefinition/%s: not found\n", name)
		case err != nil:
			return fmt.Errorf("deleting CustomResourceDefinition %s: %w", name, err)
		default:
			fmt.Fprintf(u.out, "CustomResourceDefinition/%s: deleted\n", name)
		}
	}
	return nil
}

// removeNamespace deletes the namespace only when install created it.
func (u *uninstaller) removeNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{}
	cctx, cancel := callCtx(ctx)
	defer cancel()
	err := u.c.Get(cctx, client.ObjectKey{Name: u.ns}, ns)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading namespace %s: %w", u.ns, err)
	case ns.Labels[install.CreatedNamespaceKey] != "true":
		_, err = fmt.Fprintf(u.out, "Namespace/%s: kept (install did not create it)\n", u.ns)
		return err
	}
	uid := ns.UID
	if err := u.c.Delete(cctx, ns, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", u.ns, err)
	}
	_, err = fmt.Fprintf(u.out, "Namespace/%s: deleted (install created it)\n", u.ns)
	return err
}
