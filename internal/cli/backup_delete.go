package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
)

type backupDeleteOptions struct {
	selector string
	all      bool
	confirm  bool
	force    bool
	wait     bool
	dryRun   bool
	skip     bool
	timeout  time.Duration
}

func newBackupDeleteCommand(f *Factory) *cobra.Command {
	o := &backupDeleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete [NAME...] [--selector SELECTOR | --all]",
		Short: "Delete backups, their data, snapshots and restores",
		Long: "Delete asks the server to delete each backup: it creates a DeleteBackupRequest, and the\n" +
			"server runs the DeleteItemActions on the backup's items, deletes its volume snapshots, its\n" +
			"restores and its files in object storage, and then the Backup object. If a step fails, nothing\n" +
			"after it runs, the backup stays, and the server retries; `lifeboat delete-request describe`\n" +
			"shows where it stands.\n\n" +
			"--dry-run prints what the deletion would do, changing nothing. --force removes only the Backup\n" +
			"object, leaving its data, snapshots and anything its plugins created behind, and says what.\n" +
			"--skip-failed-actions is consent to go on past the items whose DeleteItemActions keep failing:\n" +
			"the deletion completes, and its report lists every item it went past with the error (what those\n" +
			"actions were to clean up is left for you). Given while another deletion of the backup is\n" +
			"retrying, it lets that one go on past its failing items at once.\n" +
			"Deleting asks for confirmation on a terminal; elsewhere it needs --confirm.",
		Args: cobra.ArbitraryArgs,
		Example: "  lifeboat backup delete nightly-20260301 --confirm --wait\n" +
			"  lifeboat backup delete --selector app=shop --confirm\n" +
			"  lifeboat backup delete nightly-20260301 --dry-run\n" +
			"  lifeboat backup delete nightly-20260301 --skip-failed-actions --confirm --wait",
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, f, args)
		}),
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.selector, "selector", "l", "", "delete the backups whose labels match this selector")
	fl.BoolVar(&o.all, "all", false, "delete every backup in the namespace")
	fl.BoolVar(&o.confirm, "confirm", false, "do not ask for confirmation")
	fl.BoolVar(&o.force, "force", false, "remove only the Backup objects, leaving their data and snapshots behind")
	fl.BoolVarP(&o.wait, "wait", "w", false, "wait for each deletion to end and print its report")
	fl.BoolVar(&o.dryRun, "dry-run", false, "print what the deletion would do, and change nothing")
	fl.BoolVar(&o.skip, "skip-failed-actions", false, "go on past the items whose DeleteItemActions keep failing, and list them in the report, instead of keeping the backup")
	fl.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long --wait and --dry-run wait for the server")
	return cmd
}

func (o *backupDeleteOptions) run(cmd *cobra.Command, f *Factory, names []string) error {
	chosen := 0
	for _, c := range []bool{len(names) > 0, o.selector != "", o.all} {
		if c {
			chosen++
		}
	}
	if chosen != 1 {
		return errors.New("name the backups to delete, or give --selector or --all (exactly one of the three)")
	}
	if o.force && o.dryRun {
		return errors.New("--force and --dry-run cannot be combined")
	}
	if o.skip && (o.force || o.dryRun) {
		return errors.New("--skip-failed-actions goes with a deletion, not with --force or --dry-run")
	}
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	list, err := backupKind.list(ctx, c, f.Namespace, names, o.selector)
	if err != nil {
		return err
	}
	backups := list.Items
	out := cmd.OutOrStdout()
	if len(backups) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "No backups found in namespace %q.\n", f.Namespace)
		return nil
	}
	if o.dryRun {
		return o.dryRunAll(ctx, f, c, out, backups)
	}
	if !o.confirm {
		if err := confirm(cmd, o.force, backups); err != nil {
			return err
		}
	}
	var errs []error
	for i := range backups {
		b := &backups[i]
		if o.force {
			errs = append(errs, forceDelete(ctx, c, out, b))
			continue
		}
		req, err := requestDeletion(ctx, c, b, o.skip)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(out, "Request %s to delete backup %s submitted. The backup is deleted once its DeleteItemActions, snapshots, restores and files are done; follow it with `lifeboat delete-request describe %s`.\n", req.Name, b.Name, req.Name)
		if o.wait {
			errs = append(errs, waitForDeletion(ctx, f, c, out, req.Name, o.timeout))
		}
	}
	return errors.Join(errs...)
}

// confirm asks on a terminal; anywhere else an unconfirmed deletion is
// refused, so a script cannot delete backups by accident.
func confirm(cmd *cobra.Command, force bool, backups []v1.Backup) error {
	names := make([]string, len(backups))
	for i := range backups {
		names[i] = backups[i].Name
	}
	in, ok := cmd.InOrStdin().(*os.File)
	if !ok || !isTerminal(in) {
		// Whatever a pipe says is no answer: nobody saw the question.
		what := "backup " + names[0]
		if len(names) > 1 {
			what = fmt.Sprintf("%d backups (%s)", len(names), strings.Join(names, ", "))
		}
		return fmt.Errorf("refusing to delete %s without --confirm: standard input is not a terminal, so there is no one to ask", what)
	}
	what := "delete"
	if force {
		what = "remove the Backup objects of (their data stays)"
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Are you sure you want to %s %d backups (%s)? [y/N] ", what, len(backups), strings.Join(names, ", "))
	answer, _ := bufio.NewReader(in).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return errors.New("nothing deleted")
	}
	return nil
}

// requestDeletion creates a DeleteBackupRequest for b, labelled as Velero
// labels its own so Velero's tools find it too.
func requestDeletion(ctx context.Context, c client.Client, b *v1.Backup, skipFailedActions bool) (*v1.DeleteBackupRequest, error) {
	req := v1.NewDeleteBackupRequest(b)
	req.Spec.SkipFailedActions = skipFailedActions
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	if err := c.Create(callCtx, req); err != nil {
		return nil, fmt.Errorf("creating the deletion request of backup %q: %w", b.Name, err)
	}
	return req, nil
}

// forceDelete removes the Backup object only: the finalizer that would run
// the deletion first, then the object. It says what stays behind.
func forceDelete(ctx context.Context, c client.Client, out io.Writer, b *v1.Backup) error {
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	if controllerutil.ContainsFinalizer(b, v1.BackupFinalizer) {
		orig := b.DeepCopy()
		controllerutil.RemoveFinalizer(b, v1.BackupFinalizer)
		if err := c.Patch(callCtx, b, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing the finalizer of backup %q: %w", b.Name, err)
		}
	}
	if err := c.Delete(callCtx, b); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting backup %q: %w", b.Name, err)
	}
	fmt.Fprintf(out, "Backup %s removed; nothing else was deleted. Left behind:\n", b.Name)
	loc := b.Spec.StorageLocation
	fmt.Fprintf(out, "  - its files under backups/%s/ in storage location %s (the next backup sync brings the Backup back)\n", b.Name, valueOr(loc, "<default>"))
	if n := b.Status.VolumeSnapshotsCompleted; n > 0 {
		fmt.Fprintf(out, "  - %s (in its volume snapshot locations %s)\n", counted(int64(n), "native volume snapshot"), listOr(b.Spec.VolumeSnapshotLocations, none))
	}
	if restores, err := cluster.RestoresOf(ctx, c, b.Namespace, b.Name); err != nil {
		fmt.Fprintf(out, "  - its restores, if any (%v)\n", err)
	} else if len(restores) > 0 {
		fmt.Fprintf(out, "  - its restores %s (the objects, and their files under restores/<name>/)\n", strings.Join(restores, ", "))
	}
	fmt.Fprintln(out, "  - whatever its plugins created outside the backup (no DeleteItemAction ran)")
	return nil
}

// waitForDeletion polls a request until it ends and prints how.
func waitForDeletion(ctx context.Context, f *Factory, c client.Client, out io.Writer, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := waitUntilDone(ctx, f, c, out, "delete-request", client.ObjectKey{Namespace: f.Namespace, Name: name},
		func() *v1.DeleteBackupRequest { return &v1.DeleteBackupRequest{} },
		func(r *v1.DeleteBackupRequest) (string, string, bool) {
			phase := requestPhase(r)
			line := fmt.Sprintf("Deletion of backup %s: %s, attempt %d", r.Spec.BackupName, phase, r.Status.Attempts)
			return string(phase), line, phase == v1.DeleteBackupRequestPhaseProcessed || phase == v1.DeleteBackupRequestPhaseFailed
		})
	if err != nil {
		return err
	}
	d := newDescriber(out)
	if req.Status.Report != nil {
		describeDeletionReport(d, req.Status.Report)
	}
	describeDeletionErrors(d, &req.Status)
	if err := d.tw.Flush(); err != nil {
		return err
	}
	if requestPhase(req) == v1.DeleteBackupRequestPhaseFailed || len(req.Status.Errors) > 0 {
		return fmt.Errorf("deletion of backup %q failed (request %s): %s", req.Spec.BackupName, req.Name, strings.Join(req.Status.Errors, "; "))
	}
	fmt.Fprintf(out, "Backup %s deleted.\n", req.Spec.BackupName)
	return nil
}

// dryRunAll prints each backup's deletion plan, computed by the server
// (only it runs the DeleteItemActions' AppliesTo and reads the store).
func (o *backupDeleteOptions) dryRunAll(ctx context.Context, f *Factory, c client.Client, out io.Writer, backups []v1.Backup) error {
	var errs []error
	for i := range backups {
		errs = append(errs, dryRun(ctx, f, c, out, &backups[i], o.timeout))
	}
	return errors.Join(errs...)
}

// dryRun asks the server for one backup's plan through a request with
// spec.dryRun, prints it, and removes the request.
func dryRun(ctx context.Context, f *Factory, c client.Client, out io.Writer, b *v1.Backup, timeout time.Duration) error {
	req := v1.NewDeleteBackupRequest(b)
	req.Spec.DryRun = true
	createCtx, cancel := callCtx(ctx)
	err := c.Create(createCtx, req)
	cancel()
	if err != nil {
		return fmt.Errorf("asking for the deletion plan of backup %q: %w", b.Name, err)
	}
	defer func() {
		cctx, cancel := callCtx(context.WithoutCancel(ctx))
		defer cancel()
		_ = c.Delete(cctx, req)
	}()
	wctx, wcancel := context.WithTimeout(ctx, timeout)
	defer wcancel()
	key := client.ObjectKeyFromObject(req)
	for {
		cur := &v1.DeleteBackupRequest{}
		getCtx, cancel := callCtx(wctx)
		err := c.Get(getCtx, key, cur)
		cancel()
		if err != nil {
			return fmt.Errorf("reading the deletion plan of backup %q: %w", b.Name, err)
		}
		switch requestPhase(cur) {
		case v1.DeleteBackupRequestPhaseProcessed, v1.DeleteBackupRequestPhaseFailed:
			if cur.Status.Plan == nil {
				return fmt.Errorf("no deletion plan for backup %q: %s", b.Name, valueOr(strings.Join(cur.Status.Errors, "; "), "the server gave none"))
			}
			printPlan(out, b.Name, cur.Status.Plan)
			return nil
		}
		if err := sleep(wctx, f.pollInterval()); err != nil {
			return fmt.Errorf("waiting for the deletion plan of backup %q (is the server running?): %w", b.Name, err)
		}
	}
}

func printPlan(out io.Writer, backup string, p *v1.DeletionPlan) {
	fmt.Fprintf(out, "Deleting backup %s would (dry run, nothing changed):\n", backup)
	fmt.Fprintln(out, "1. call the DeleteItemActions:")
	if len(p.Actions) == 0 {
		fmt.Fprintln(out, "   none is installed")
	}
	for _, a := range p.Actions {
		fmt.Fprintf(out, "   %s: %s\n", a.Name, counted(a.Count, "item"))
		for _, it := range a.Items {
			fmt.Fprintf(out, "     - %s\n", it)
		}
		if int64(len(a.Items)) < a.Count {
			fmt.Fprintf(out, "     ... and %d more\n", a.Count-int64(len(a.Items)))
		}
	}
	fmt.Fprintf(out, "2. delete %s\n", counted(int64(len(p.Snapshots)), "native volume snapshot"))
	for _, s := range p.Snapshots {
		fmt.Fprintf(out, "     - %s\n", s)
	}
	fmt.Fprintf(out, "3. forget %s\n", counted(int64(len(p.PodVolumeSnapshots)), "pod volume snapshot"))
	for _, s := range p.PodVolumeSnapshots {
		fmt.Fprintf(out, "     - %s\n", s)
	}
	for _, r := range p.PodVolumeRepositories {
		fmt.Fprintf(out, "   then every other pod volume snapshot of the backup (checkpoints of failed uploads, unrecorded ones) in the repository of %s\n", r)
	}
	fmt.Fprintf(out, "4. delete %s\n", counted(int64(len(p.Restores)), "restore"))
	for _, r := range p.Restores {
		fmt.Fprintf(out, "     - %s\n", r)
	}
	fmt.Fprintf(out, "5. remove %d object store keys\n", p.Keys)
	for _, k := range p.KeyList {
		fmt.Fprintf(out, "     - %s\n", k)
	}
	if int64(len(p.KeyList)) < p.Keys {
		fmt.Fprintf(out, "     ... and %d more\n", p.Keys-int64(len(p.KeyList)))
	}
	fmt.Fprintf(out, "6. remove the Backup object %s\n", backup)
	for _, w := range p.Warnings {
		fmt.Fprintf(out, "Warning: %s\n", w)
	}
}

// counted is "1 item", "2 items": output people read, and tests parse.
func counted(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
