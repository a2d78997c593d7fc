package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// verifySuffix names the namespaces a verification's restore dry run maps
// the bench namespaces to: <namespace>-v.
const verifySuffix = "-v"

// measureVerifySize runs the verification measurement for one N: a fresh
// cluster with the bench objects, one Lifeboat backup of them, the target
// namespaces of the dry run, then a fresh server that verifies that backup
// with a restore dry run R times, alternating with the create floor in
// dry-run mode, which reads the same archive and sends the same dry-run
// creates.
func measureVerifySize(ctx context.Context, c config, n int) (res verifySizeResult, err error) {
	res.N = n
	e, err := setUp(ctx, c, n, fmt.Sprintf("verify-n%d", n))
	if err != nil {
		return res, err
	}
	defer e.close()
	res.PopulateSeconds = e.populateSeconds
	res.AvgItemBytes = e.bytesPerItem
	want := n + len(e.namespaces)

	source := fmt.Sprintf("bench-%d-source", n)
	logf("N=%d: backing up the bench namespaces once (%s)", n, source)
	bk, err := backupRunner{k: e.k, srv: e.srv, namespaces: e.namespaces, storeRoot: e.storeRoot, timeout: c.backupTimeout}.run(ctx, source)
	if err != nil {
		return res, err
	}
	if bk.Items != want {
		return res, fmt.Errorf("backup %s holds %d items, want the %d ConfigMaps and %d namespaces", source, bk.Items, n, len(e.namespaces))
	}
	res.BackupSeconds, res.ArchiveBytes = bk.WallSeconds, bk.ArchiveBytes

	// The targets exist before either side runs: the API server checks
	// nothing in a namespace that does not (the restore dry run would
	// count every ConfigMap as an unchecked create, and the floor's
	// creates would be refused), and a verification is meant to check.
	targets := make([]string, len(e.namespaces))
	pairs := make([]string, len(e.namespaces))
	for i, ns := range e.namespaces {
		targets[i] = ns + verifySuffix
		pairs[i] = ns + ":" + targets[i]
		if err := createNamespace(ctx, e.k, targets[i]); err != nil {
			return res, err
		}
	}

	// A fresh server process, so that its VmHWM is that of the
	// verifications alone, not of the backup above.
	if err := e.restartServer(ctx, "server-verify.log"); err != nil {
		return res, err
	}
	floor := createFloorRunner{
		bin: c.createFloorBin, kubeconfig: e.kubeconfig, archive: backupArchive(e.storeRoot, source),
		backup: source, namespaces: e.namespaces, workers: c.restoreWorkers, timeout: c.restoreTimeout, dryRun: true,
	}
	lb := verifyRunner{k: e.k, srv: e.srv, backup: source, mapping: strings.Join(pairs, ","), timeout: c.restoreTimeout}
	for i := range c.runs {
		r := verifyRunResult{Run: i + 1}
		token := fmt.Sprintf("bench-%d-run%d-%s", n, i+1, time.Now().UTC().Format(time.RFC3339Nano))
		fc, lc, err := alternate(ctx, e.k, c.pause, i, func() (err error) {
			r.Floor, err = floor.runAs(ctx, verifySuffix, fmt.Sprintf("createfloor-verify%d", i+1))
			return err
		}, func() (err error) {
			r.Lifeboat, err = lb.run(ctx, token)
			return err
		})
		if err != nil {
			return res, err
		}
		r.Floor.restoreAPICalls = restoreCalls(fc)
		r.Lifeboat.restoreAPICalls = restoreCalls(lc)
		if r.Floor.Objects != want {
			return res, fmt.Errorf("the create floor sent %d dry-run creates, want %d", r.Floor.Objects, want)
		}
		if err := r.Lifeboat.check(n, len(e.namespaces)); err != nil {
			return res, fmt.Errorf("%w (server log %s)", err, e.srv.logPath)
		}
		logf("N=%d verify run %d: floor %.3fs, lifeboat %.3fs (integrity check %.3fs, dry run ended %.3fs), ratio %.2f",
			n, i+1, r.Floor.WallSeconds, r.Lifeboat.WallSeconds, r.Lifeboat.CheckSeconds, r.Lifeboat.DryRunEndedSeconds, r.Ratio())
		res.Runs = append(res.Runs, r)
	}
	if err := assertEmpty(ctx, e.k, targets); err != nil {
		return res, err
	}
	st, err := e.serverPeak()
	if err != nil {
		return res, err
	}
	res.ServerPeakRSSKiB = st.hwmKiB
	res.ServerRSSAfterKiB = st.rssKiB
	return res, nil
}

// assertEmpty fails if any ConfigMap is in the namespaces: a dry run that
// stored something would make the next run's creates conflict, and would
// not be a dry run.
func assertEmpty(ctx context.Context, k *kube, namespaces []string) error {
	for _, ns := range namespaces {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		l, err := k.cs.CoreV1().ConfigMaps(ns).List(cctx, metav1.ListOptions{Limit: 1})
		cancel()
		if err != nil {
			return fmt.Errorf("listing the ConfigMaps of dry-run target %s: %w", ns, err)
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("the dry runs left ConfigMaps in %s (%s among them)", ns, l.Items[0].Name)
		}
	}
	return nil
}

// verifyRunner asks the server to verify the backup with a restore dry
// run, as `lifeboat backup verify --restore-dry-run --namespace-mappings`
// does, and times it from outside the server.
type verifyRunner struct {
	k       *kube
	srv     *serverProcess
	backup  string
	mapping string
	timeout time.Duration
}

// run requests a verification under token and waits for its answer; the
// outcome is read, not judged (verifyResult.check does that).
func (v verifyRunner) run(ctx context.Context, token string) (verifyResult, error) {
	cpuBefore, err := readProcCPU(v.srv.pid())
	if err != nil {
		return verifyResult{}, err
	}
	res, err := v.requestAndWait(ctx, token)
	if err != nil {
		return res, err
	}
	cpuAfter, err := readProcCPU(v.srv.pid())
	if err != nil {
		return res, err
	}
	st, err := readProcStatus(v.srv.pid())
	if err != nil {
		return res, err
	}
	res.ServerCPUSeconds = (cpuAfter - cpuBefore).Seconds()
	res.PeakRSSKiBSoFar = st.hwmKiB

	rs, err := v.dryRunRestore(ctx, token)
	if err != nil {
		return res, err
	}
	res.Restore, res.RestorePhase = rs.Name, string(rs.Status.Phase)
	res.RestoreDryRunFlag = rs.Spec.DryRun
	if s, c := rs.Status.StartTimestamp, rs.Status.CompletionTimestamp; s != nil && c != nil {
		res.DryRunServerSeconds = c.Sub(s.Time).Seconds()
	}
	if dr := rs.Status.DryRun; dr != nil {
		res.HasCounts = true
		res.WouldCreate, res.WouldUpdate, res.WouldSkip, res.WouldFail, res.Unchecked = dr.WouldCreate, dr.WouldUpdate, dr.WouldSkip, dr.WouldFail, dr.Unchecked
	}
	return res, nil
}

// requestAndWait patches the request onto the Backup and watches it, and
// the Restores of the backup, until the server answers token. Watches,
// not polls: at 2,000 items a verification lasts a few seconds, and a
// poll interval would blur each of the times it reports.
func (v verifyRunner) requestAndWait(ctx context.Context, token string) (verifyResult, error) {
	res := verifyResult{Token: token}
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	backupOpts := []client.ListOption{client.InNamespace(serverNamespace), client.MatchingFields{"metadata.name": v.backup}}
	restoreOpts := []client.ListOption{client.InNamespace(serverNamespace), client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(v.backup)}}
	bw, err := watchFrom(ctx, v.k, &v1.BackupList{}, backupOpts, "")
	if err != nil {
		return res, err
	}
	defer func() { bw.Stop() }()
	rw, err := watchFrom(ctx, v.k, &v1.RestoreList{}, restoreOpts, "")
	if err != nil {
		return res, err
	}
	defer func() { rw.Stop() }()

	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1.VerifyRequestAnnotation: token, v1.VerifyDryRunAnnotation: v.mapping,
	}}})
	if err != nil {
		return res, fmt.Errorf("encoding the verification request: %w", err)
	}
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: v.backup}}
	start := time.Now()
	cctx, ccancel := context.WithTimeout(ctx, callTimeout)
	err = v.k.c.Patch(cctx, b, client.RawPatch(types.MergePatchType, patch))
	ccancel()
	if err != nil {
		return res, fmt.Errorf("requesting the verification of backup %s: %w", v.backup, err)
	}
	backupRV, restoreRV := b.ResourceVersion, ""
	since := func() float64 { return time.Since(start).Seconds() }

	for {
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("backup %s: verification %s not answered within %s: %w", v.backup, token, v.timeout, ctx.Err())
		case <-v.srv.done:
			return res, v.srv.exited()
		case ev, ok := <-bw.ResultChan():
			if !ok {
				// The API server ends watches now and then; carry on from
				// the last state seen.
				if bw, err = watchFrom(ctx, v.k, &v1.BackupList{}, backupOpts, backupRV); err != nil {
					return res, err
				}
				continue
			}
			if ev.Type == watch.Error {
				return res, fmt.Errorf("watching backup %s: %v", v.backup, ev.Object)
			}
			got, ok := ev.Object.(*v1.Backup)
			if !ok {
				continue
			}
			backupRV = got.ResourceVersion
			a := got.Annotations
			// The server records the integrity check under the token
			// before it starts the dry run, and drops it with the answer.
			if res.CheckSeconds == 0 && strings.HasPrefix(a[v1.VerifyIntegrityAnnotation], token+" ") {
				res.CheckSeconds = since()
			}
			if a[v1.VerifiedRequestAnnotation] == token {
				res.WallSeconds = since()
				res.Verification = a[v1.VerificationAnnotation]
				// "<time> <reason>: <summary>"
				_, rest, _ := strings.Cut(res.Verification, " ")
				res.Reason, _, _ = strings.Cut(rest, ":")
				return res, nil
			}
		case ev, ok := <-rw.ResultChan():
			if !ok {
				if rw, err = watchFrom(ctx, v.k, &v1.RestoreList{}, restoreOpts, restoreRV); err != nil {
					return res, err
				}
				continue
			}
			if ev.Type == watch.Error {
				return res, fmt.Errorf("watching the Restores of backup %s: %v", v.backup, ev.Object)
			}
			rs, ok := ev.Object.(*v1.Restore)
			if !ok {
				continue
			}
			restoreRV = rs.ResourceVersion
			if rs.Annotations[v1.VerifyRestoreAnnotation] != token {
				continue
			}
			if res.DryRunCreatedSeconds == 0 {
				res.DryRunCreatedSeconds = since()
			}
			if res.DryRunEndedSeconds == 0 && restoreFinished(string(rs.Status.Phase)) {
				res.DryRunEndedSeconds = since()
			}
		}
	}
}

// watchFrom watches the objects of list's type that opts select, from
// resourceVersion (empty: the current state first).
func watchFrom(ctx context.Context, k *kube, list client.ObjectList, opts []client.ListOption, resourceVersion string) (watch.Interface, error) {
	if resourceVersion != "" {
		opts = append(slices.Clone(opts), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: resourceVersion}})
	}
	w, err := k.c.Watch(ctx, list, opts...)
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", strings.TrimPrefix(fmt.Sprintf("%T", list), "*v1."), err)
	}
	return w, nil
}

// dryRunRestore finds the Restore the server made for the request token:
// labelled with the backup's name, annotated with the token.
func (v verifyRunner) dryRunRestore(ctx context.Context, token string) (*v1.Restore, error) {
	var l v1.RestoreList
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err := v.k.c.List(cctx, &l, client.InNamespace(serverNamespace), client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(v.backup)})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("listing the Restores of backup %s: %w", v.backup, err)
	}
	var found []*v1.Restore
	for i := range l.Items {
		if l.Items[i].Annotations[v1.VerifyRestoreAnnotation] == token {
			found = append(found, &l.Items[i])
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("backup %s: %d Restores answer verification %s, want the one dry run", v.backup, len(found), token)
	}
	return found[0], nil
}

// verifyResult is one Lifeboat verification with a restore dry run.
type verifyResult struct {
	Token string `json:"token"`
	// Verification is the answer, "<time> <reason>: <summary>"; Reason
	// its reason.
	Verification string `json:"verification"`
	Reason       string `json:"reason"`
	// WallSeconds is from the request's patch to the watch event showing
	// it answered. CheckSeconds is the part until the server recorded
	// the integrity check (the tarball read against its digests),
	// DryRunCreatedSeconds until the dry-run Restore appeared,
	// DryRunEndedSeconds until it reached a terminal phase; what follows
	// is the server noticing that and writing the answer.
	WallSeconds          float64 `json:"wallSeconds"`
	CheckSeconds         float64 `json:"checkSeconds"`
	DryRunCreatedSeconds float64 `json:"dryRunCreatedSeconds"`
	DryRunEndedSeconds   float64 `json:"dryRunEndedSeconds"`
	// Restore is the dry-run Restore's name; DryRunServerSeconds its
	// completionTimestamp - startTimestamp (1 s resolution).
	Restore             string  `json:"restore"`
	RestorePhase        string  `json:"restorePhase"`
	RestoreDryRunFlag   bool    `json:"restoreDryRun"`
	DryRunServerSeconds float64 `json:"dryRunServerSeconds"`
	// HasCounts says the Restore had status.dryRun, whose counts follow.
	HasCounts        bool    `json:"hasCounts"`
	WouldCreate      int     `json:"wouldCreate"`
	WouldUpdate      int     `json:"wouldUpdate"`
	WouldSkip        int     `json:"wouldSkip"`
	WouldFail        int     `json:"wouldFail"`
	Unchecked        int     `json:"unchecked"`
	ServerCPUSeconds float64 `json:"serverCPUSeconds"`
	// PeakRSSKiBSoFar is the server's VmHWM right after this verification.
	PeakRSSKiBSoFar int64 `json:"peakRSSKiBSoFar"`
	restoreAPICalls
}

// check says whether the verification did what a fast one could skip:
// the backup verified, every ConfigMap checked by the API server as a
// create, the namespaces, which exist, skipped, nothing failing.
func (r verifyResult) check(configMaps, namespaces int) error {
	switch {
	case r.Reason != v1.VerificationVerified:
		return fmt.Errorf("verification %s answered %q, want reason %s", r.Token, r.Verification, v1.VerificationVerified)
	case !r.RestoreDryRunFlag || r.RestorePhase != string(v1.RestorePhaseCompleted) || !r.HasCounts:
		return fmt.Errorf("dry run %s of verification %s: spec.dryRun %t, phase %s, status.dryRun present %t; want a dry run, Completed, with counts",
			r.Restore, r.Token, r.RestoreDryRunFlag, r.RestorePhase, r.HasCounts)
	case r.WouldCreate != configMaps || r.Unchecked != 0 || r.WouldSkip != namespaces || r.WouldUpdate != 0 || r.WouldFail != 0:
		return fmt.Errorf("dry run %s of verification %s: %d would be created (%d not checked), %d updated, %d skipped, %d fail; want %d created, all checked, the %d existing namespaces skipped",
			r.Restore, r.Token, r.WouldCreate, r.Unchecked, r.WouldUpdate, r.WouldSkip, r.WouldFail, configMaps, namespaces)
	}
	return nil
}

// verifyRunResult pairs a dry-run create floor run with the verification
// next to it.
type verifyRunResult struct {
	Run      int               `json:"run"`
	Floor    createFloorResult `json:"floor"`
	Lifeboat verifyResult      `json:"lifeboat"`
}

// Ratio is the verification's wall time over the floor's in the same run
// (above 1: Lifeboat is slower).
func (r verifyRunResult) Ratio() float64 {
	if r.Floor.WallSeconds <= 0 {
		return 0
	}
	return r.Lifeboat.WallSeconds / r.Floor.WallSeconds
}

// verifySizeResult is everything the verification measurement found at
// one N.
type verifySizeResult struct {
	N               int               `json:"n"`
	PopulateSeconds float64           `json:"populateSeconds"`
	AvgItemBytes    float64           `json:"avgItemBytes"`
	BackupSeconds   float64           `json:"backupSeconds"`
	ArchiveBytes    int64             `json:"archiveBytes"`
	Runs            []verifyRunResult `json:"runs"`
	// ServerPeakRSSKiB is the VmHWM of the server process that ran the
	// verifications (and nothing else) at this N.
	ServerPeakRSSKiB  int64 `json:"serverPeakRSSKiB"`
	ServerRSSAfterKiB int64 `json:"serverRSSAfterKiB"`
}

func (s verifySizeResult) medians() (floorS, lifeboatS, ratio, serverCPU float64) {
	var f, l, r, cpu []float64
	for _, run := range s.Runs {
		f = append(f, run.Floor.WallSeconds)
		l = append(l, run.Lifeboat.WallSeconds)
		r = append(r, run.Ratio())
		cpu = append(cpu, run.Lifeboat.ServerCPUSeconds)
	}
	return median(f), median(l), median(r), median(cpu)
}

// writeVerifyReport prints the verification summary table and every run.
func writeVerifyReport(w io.Writer, c config, results []verifySizeResult) {
	fmt.Fprintf(w, "## Verify: Lifeboat vs. reading the tarball plus the dry-run creates (%d runs per N, medians)\n\n", c.runs)
	fmt.Fprintln(w, "| N | floor s | lifeboat s | ratio (lifeboat/floor) | server CPU s | server peak RSS MiB |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|")
	for _, s := range results {
		f, l, r, cpu := s.medians()
		fmt.Fprintf(w, "| %d | %.3f | %.3f | %.2f | %.2f | %.1f |\n", s.N, f, l, r, cpu, kibToMiB(s.ServerPeakRSSKiB))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Lifeboat: `backup verify --restore-dry-run` of one backup of the N ConfigMaps and %d namespaces, every namespace mapped to <namespace>%s (which exist, so every ConfigMap is checked by the API server), from the request's patch to its answer: the stored files checked against their digests, then a dry-run Restore (every create sent with dryRun=All) run and waited for; each answer must be Verified, with N would-create (none unchecked), the namespaces skipped and none failing. The floor reads the same tar.gz and sends the same N + %d creates with dryRun=All, %d at a time (bench/createfloor --dry-run), from process start to exit. The ratio is of times (target: at most 2), per run, then the median; %s idle before each measurement. Server CPU is the server's during a verification; server peak RSS is VmHWM of the one server process that ran the verifications at that N.",
		c.namespaces, verifySuffix, c.namespaces, c.restoreWorkers, c.pause)
	if len(c.serverArgs) > 0 {
		fmt.Fprintf(w, " The server ran with `%s`.", strings.Join(c.serverArgs, " "))
	}
	fmt.Fprint(w, "\n\n")

	fmt.Fprintln(w, "### Raw verify runs")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| N | run | floor creates | floor wall s | floor read s | floor create s | floor CPU s | floor RSS MiB | floor API calls (POST/GET/PATCH) | lifeboat s | check s | dry run created s | dry run ended s | dry run s (status) | would create | would skip | server CPU s | server VmHWM MiB | lifeboat API calls (POST/GET/PATCH) | ratio |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range results {
		for _, r := range s.Runs {
			f, l := r.Floor, r.Lifeboat
			fmt.Fprintf(w, "| %d | %d | %d | %.3f | %.3f | %.3f | %.2f | %.1f | %s | %.3f | %.3f | %.3f | %.3f | %.0f | %d | %d | %.2f | %.1f | %s | %.2f |\n",
				s.N, r.Run, f.Objects, f.WallSeconds, f.ReadSeconds, f.CreateSeconds, f.CPUSeconds, kibToMiB(f.PeakRSSKiB), f.summary(),
				l.WallSeconds, l.CheckSeconds, l.DryRunCreatedSeconds, l.DryRunEndedSeconds, l.DryRunServerSeconds, l.WouldCreate, l.WouldSkip,
				l.ServerCPUSeconds, kibToMiB(l.PeakRSSKiBSoFar), l.summary(), r.Ratio())
		}
	}
	fmt.Fprintln(w)
	for _, s := range results {
		fmt.Fprintf(w, "- N=%d: items of %.0f B JSON on average; backup %.1f MiB, taken in %.1f s; cluster populated in %.1f s; server RSS after the verifications %.1f MiB\n",
			s.N, s.AvgItemBytes, float64(s.ArchiveBytes)/(1<<20), s.BackupSeconds, s.PopulateSeconds, kibToMiB(s.ServerRSSAfterKiB))
	}
}
