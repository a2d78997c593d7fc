package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// floorResult is one run of the floor program.
type floorResult struct {
	Items int `json:"items"`
	// WallSeconds is from process start to exit, measured here.
	WallSeconds float64 `json:"wallSeconds"`
	// SelfSeconds is what the floor measured itself: LISTs and archive,
	// without process start and client setup.
	SelfSeconds  float64 `json:"selfSeconds"`
	CPUSeconds   float64 `json:"cpuSeconds"`
	PeakRSSKiB   int64   `json:"peakRSSKiB"`
	JSONBytes    int64   `json:"jsonBytes"`
	ArchiveBytes int64   `json:"archiveBytes"`
	AvgItemBytes float64 `json:"avgItemBytes"`
	apiCalls
}

// apiCalls are the API requests counted by the API server during a
// measurement (about: a watch is only counted once it ends).
type apiCalls struct {
	APIRequests int `json:"apiRequests"`
	APILists    int `json:"apiLists"`
}

func (f floorResult) ItemsPerSec() float64 { return perSec(f.Items, f.WallSeconds) }

// lifeboatResult is one Lifeboat backup.
type lifeboatResult struct {
	Name string `json:"name"`
	// Items is status.progress.itemsBackedUp: the ConfigMaps plus the
	// namespaces themselves, which a Velero-format backup includes.
	Items int `json:"items"`
	// WallSeconds is from the Backup's create call to the watch event
	// that shows it Completed.
	WallSeconds float64 `json:"wallSeconds"`
	// PickupSeconds is from the create call to the first status the
	// server wrote (InProgress): the controller's reaction time, part of
	// WallSeconds.
	PickupSeconds float64 `json:"pickupSeconds"`
	// ServerSeconds is completionTimestamp - startTimestamp (1 s resolution).
	ServerSeconds    float64 `json:"serverSeconds"`
	ServerCPUSeconds float64 `json:"serverCPUSeconds"`
	// PeakRSSKiBSoFar is the server's VmHWM right after this backup.
	PeakRSSKiBSoFar int64 `json:"peakRSSKiBSoFar"`
	ArchiveBytes    int64 `json:"archiveBytes"`
	// apiCalls include the orchestrator's create and watch and the
	// server's status writes, not only its LISTs.
	apiCalls
}

func (l lifeboatResult) ItemsPerSec() float64 { return perSec(l.Items, l.WallSeconds) }

// runResult pairs a floor run with the Lifeboat backup run next to it.
type runResult struct {
	Run      int            `json:"run"`
	Floor    floorResult    `json:"floor"`
	Lifeboat lifeboatResult `json:"lifeboat"`
}

// Ratio compares Lifeboat with the floor of the same run, so that a slow
// moment of the shared machine affects both sides of one ratio.
func (r runResult) Ratio() float64 {
	f := r.Floor.ItemsPerSec()
	if f == 0 {
		return 0
	}
	return r.Lifeboat.ItemsPerSec() / f
}

// sizeResult is everything measured at one N.
type sizeResult struct {
	N               int         `json:"n"`
	PopulateSeconds float64     `json:"populateSeconds"`
	Runs            []runResult `json:"runs"`
	// ServerPeakRSSKiB is the server's VmHWM after every backup at this N.
	ServerPeakRSSKiB  int64 `json:"serverPeakRSSKiB"`
	ServerRSSAfterKiB int64 `json:"serverRSSAfterKiB"`
}

func (s sizeResult) medians() (floorIPS, lifeboatIPS, ratio, floorRSSMiB float64) {
	var f, l, r, rss []float64
	for _, run := range s.Runs {
		f = append(f, run.Floor.ItemsPerSec())
		l = append(l, run.Lifeboat.ItemsPerSec())
		r = append(r, run.Ratio())
		rss = append(rss, kibToMiB(run.Floor.PeakRSSKiB))
	}
	return median(f), median(l), median(r), median(rss)
}

func perSec(items int, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(items) / seconds
}

func kibToMiB(kib int64) float64 { return float64(kib) / 1024 }

// median of xs; the mean of the middle two for an even count.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// writeReport prints the summary table and, below it, every run.
func writeReport(w io.Writer, c config, results []sizeResult) {
	fmt.Fprintf(w, "## Backup throughput: Lifeboat vs. the floor (%d runs per N, medians)\n\n", c.runs)
	fmt.Fprintln(w, "| N | floor items/s | lifeboat items/s | ratio (lifeboat/floor) | floor peak RSS MiB | server peak RSS MiB |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|")
	for _, s := range results {
		f, l, r, frss := s.medians()
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %.2f | %.1f | %.1f |\n", s.N, f, l, r, frss, kibToMiB(s.ServerPeakRSSKiB))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%d namespaces; %d warm-up run(s) of each side per N, not counted; %s idle before each measurement. Items/s and ratio are medians over runs; the ratio is taken per run, then the median. Server peak RSS is VmHWM of one server process per N, over all its backups.\n\n", c.namespaces, c.warmup, c.pause)

	fmt.Fprintln(w, "### Raw runs")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| N | run | floor items | floor wall s | floor self s | floor CPU s | floor RSS MiB | floor API calls (LIST) | lifeboat items | lifeboat wall s | pickup s | server s (status) | server CPU s | server VmHWM MiB | lifeboat API calls (LIST) | ratio |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range results {
		for _, r := range s.Runs {
			fmt.Fprintf(w, "| %d | %d | %d | %.3f | %.3f | %.2f | %.1f | %d (%d) | %d | %.3f | %.3f | %.0f | %.2f | %.1f | %d (%d) | %.2f |\n",
				s.N, r.Run, r.Floor.Items, r.Floor.WallSeconds, r.Floor.SelfSeconds, r.Floor.CPUSeconds, kibToMiB(r.Floor.PeakRSSKiB), r.Floor.APIRequests, r.Floor.APILists,
				r.Lifeboat.Items, r.Lifeboat.WallSeconds, r.Lifeboat.PickupSeconds, r.Lifeboat.ServerSeconds, r.Lifeboat.ServerCPUSeconds, kibToMiB(r.Lifeboat.PeakRSSKiBSoFar), r.Lifeboat.APIRequests, r.Lifeboat.APILists, r.Ratio())
		}
	}
	fmt.Fprintln(w)
	var notes []string
	for _, s := range results {
		if len(s.Runs) == 0 {
			continue
		}
		r := s.Runs[0]
		notes = append(notes, fmt.Sprintf("N=%d: items of %.0f B JSON on average; floor archive %.1f MiB, Lifeboat archive %.1f MiB; cluster populated in %.1f s; server RSS after the runs %.1f MiB",
			s.N, r.Floor.AvgItemBytes, float64(r.Floor.ArchiveBytes)/(1<<20), float64(r.Lifeboat.ArchiveBytes)/(1<<20), s.PopulateSeconds, kibToMiB(s.ServerRSSAfterKiB)))
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "- "+strings.Join(notes, "\n- "))
	}
}

// restoreAPICalls are the API requests counted by the API server during a
// restore measurement: all of them, and the verbs that tell where they
// went (POST: creates; GET: reads; PATCH: status writes).
type restoreAPICalls struct {
	APIRequests int `json:"apiRequests"`
	APICreates  int `json:"apiCreates"`
	APIGets     int `json:"apiGets"`
	APIPatches  int `json:"apiPatches"`
}

func restoreCalls(d requestDelta) restoreAPICalls {
	return restoreAPICalls{APIRequests: d.Total, APICreates: d.Verbs["POST"], APIGets: d.Verbs["GET"], APIPatches: d.Verbs["PATCH"]}
}

func (a restoreAPICalls) summary() string {
	return fmt.Sprintf("%d (%d/%d/%d)", a.APIRequests, a.APICreates, a.APIGets, a.APIPatches)
}

// createFloorResult is one run of the create floor program.
type createFloorResult struct {
	// Label is the velero.io/restore-name the floor put on its objects.
	Label string `json:"label"`
	// Objects is the namespaces and ConfigMaps it created.
	Objects    int `json:"objects"`
	Namespaces int `json:"namespaces"`
	// WallSeconds is from process start to exit, measured here.
	WallSeconds float64 `json:"wallSeconds"`
	// SelfSeconds is what the floor measured itself (reading the archive
	// and creating), without process start and client setup; ReadSeconds
	// and CreateSeconds are its two parts.
	SelfSeconds   float64 `json:"selfSeconds"`
	ReadSeconds   float64 `json:"readSeconds"`
	CreateSeconds float64 `json:"createSeconds"`
	CPUSeconds    float64 `json:"cpuSeconds"`
	PeakRSSKiB    int64   `json:"peakRSSKiB"`
	restoreAPICalls
}

func (f createFloorResult) ObjectsPerSec() float64 { return perSec(f.Objects, f.WallSeconds) }

// restoreResult is one Lifeboat restore.
type restoreResult struct {
	Name string `json:"name"`
	// Items is status.progress.itemsRestored: the ConfigMaps plus the
	// namespaces.
	Items      int `json:"items"`
	TotalItems int `json:"totalItems"`
	Warnings   int `json:"warnings"`
	// WallSeconds is from the Restore's create call to the watch event
	// that shows it Completed.
	WallSeconds float64 `json:"wallSeconds"`
	// PickupSeconds is the part of WallSeconds before the server wrote
	// its first status (InProgress).
	PickupSeconds float64 `json:"pickupSeconds"`
	// ServerSeconds is completionTimestamp - startTimestamp (1 s resolution).
	ServerSeconds    float64 `json:"serverSeconds"`
	ServerCPUSeconds float64 `json:"serverCPUSeconds"`
	// PeakRSSKiBSoFar is the server's VmHWM right after this restore.
	PeakRSSKiBSoFar int64 `json:"peakRSSKiBSoFar"`
	restoreAPICalls
}

func (r restoreResult) ObjectsPerSec() float64 { return perSec(r.Items, r.WallSeconds) }

// restoreRunResult pairs a create floor run with the restore next to it.
type restoreRunResult struct {
	Run      int               `json:"run"`
	Floor    createFloorResult `json:"floor"`
	Lifeboat restoreResult     `json:"lifeboat"`
}

// Ratio is Lifeboat's objects/s over the floor's in the same run.
func (r restoreRunResult) Ratio() float64 {
	f := r.Floor.ObjectsPerSec()
	if f == 0 {
		return 0
	}
	return r.Lifeboat.ObjectsPerSec() / f
}

// restoreSizeResult is everything the restore measurement found at one N.
type restoreSizeResult struct {
	N               int                `json:"n"`
	PopulateSeconds float64            `json:"populateSeconds"`
	AvgItemBytes    float64            `json:"avgItemBytes"`
	BackupSeconds   float64            `json:"backupSeconds"`
	ArchiveBytes    int64              `json:"archiveBytes"`
	Runs            []restoreRunResult `json:"runs"`
	// ServerPeakRSSKiB is the VmHWM of the server process that ran the
	// restores (and nothing else) at this N.
	ServerPeakRSSKiB  int64 `json:"serverPeakRSSKiB"`
	ServerRSSAfterKiB int64 `json:"serverRSSAfterKiB"`
}

func (s restoreSizeResult) medians() (floorOPS, lifeboatOPS, ratio float64) {
	var f, l, r []float64
	for _, run := range s.Runs {
		f = append(f, run.Floor.ObjectsPerSec())
		l = append(l, run.Lifeboat.ObjectsPerSec())
		r = append(r, run.Ratio())
	}
	return median(f), median(l), median(r)
}

// writeRestoreReport prints the restore summary table and every run.
func writeRestoreReport(w io.Writer, c config, results []restoreSizeResult) {
	fmt.Fprintf(w, "## Restore throughput: Lifeboat vs. the create floor (%d runs per N, medians)\n\n", c.runs)
	fmt.Fprintln(w, "| N | create floor objects/s | lifeboat restore objects/s | ratio (lifeboat/floor) | server peak RSS MiB |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|")
	for _, s := range results {
		f, l, r := s.medians()
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %.2f | %.1f |\n", s.N, f, l, r, kibToMiB(s.ServerPeakRSSKiB))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Objects are the N ConfigMaps and the %d namespaces, restored into new namespaces (namespaceMapping). The create floor creates the same objects, read from the same backup archive, with %d concurrent workers; %d warm-up run(s) of each side, not counted; %s idle before each measurement. Objects/s and ratio are medians over runs; the ratio is taken per run, then the median. Server peak RSS is VmHWM of the one server process that ran the restores at that N.",
		c.namespaces, c.restoreWorkers, c.restoreWarmup, c.pause)
	if len(c.serverArgs) > 0 {
		fmt.Fprintf(w, " The server ran with `%s`.", strings.Join(c.serverArgs, " "))
	}
	fmt.Fprint(w, "\n\n")

	fmt.Fprintln(w, "### Raw restore runs")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| N | run | floor objects | floor wall s | floor read s | floor create s | floor CPU s | floor RSS MiB | floor API calls (POST/GET/PATCH) | lifeboat objects | lifeboat wall s | pickup s | server s (status) | server CPU s | server VmHWM MiB | lifeboat API calls (POST/GET/PATCH) | warnings | ratio |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range results {
		for _, r := range s.Runs {
			f, l := r.Floor, r.Lifeboat
			fmt.Fprintf(w, "| %d | %d | %d | %.3f | %.3f | %.3f | %.2f | %.1f | %s | %d | %.3f | %.3f | %.0f | %.2f | %.1f | %s | %d | %.2f |\n",
				s.N, r.Run, f.Objects, f.WallSeconds, f.ReadSeconds, f.CreateSeconds, f.CPUSeconds, kibToMiB(f.PeakRSSKiB), f.summary(),
				l.Items, l.WallSeconds, l.PickupSeconds, l.ServerSeconds, l.ServerCPUSeconds, kibToMiB(l.PeakRSSKiBSoFar), l.summary(), l.Warnings, r.Ratio())
		}
	}
	fmt.Fprintln(w)
	for _, s := range results {
		fmt.Fprintf(w, "- N=%d: items of %.0f B JSON on average; source backup %.1f MiB, taken in %.1f s; cluster populated in %.1f s; server RSS after the restores %.1f MiB\n",
			s.N, s.AvgItemBytes, float64(s.ArchiveBytes)/(1<<20), s.BackupSeconds, s.PopulateSeconds, kibToMiB(s.ServerRSSAfterKiB))
	}
}
