package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// Census is what exists in the server's namespace now.
type Census struct {
	Backups, Restores int
	// NewestCompleted maps a schedule label value ("" for backups made by
	// hand) to the completion time of its newest Completed backup.
	NewestCompleted map[string]time.Time
}

// CensusFunc takes a census; it reads the server's cache, so it is cheap.
type CensusFunc func(context.Context) (Census, error)

// censusTimeout bounds one census, taken while a scrape waits.
const censusTimeout = 10 * time.Second

// UseCensus sets how the server counts what exists, until stop is called:
// the server that acts on the namespace sets it while it acts. Without one
// (a standby), velero_backup_total and velero_restore_total are not
// served. stop leaves a census set since by another server of the same
// process (the tests run several) in place.
func UseCensus(f CensusFunc) (stop func()) {
	c := m.census
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owner++
	owner := c.owner
	c.take = f
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.owner == owner {
			c.take = nil
		}
	}
}

// newCensus serves velero_backup_total, velero_restore_total and
// velero_backup_last_successful_timestamp. Velero recounts them every
// minute from the Backups and Restores that exist; this takes the census
// at each scrape instead, so they are never a minute behind.
func newCensus() *censusCollector {
	return &censusCollector{
		lastSuccess: map[string]time.Time{},
		backups:     prometheus.NewDesc("velero_backup_total", "Backups that exist in the server's namespace", nil, nil),
		restores:    prometheus.NewDesc("velero_restore_total", "Restores that exist in the server's namespace", nil, nil),
		lastSuccessDesc: prometheus.NewDesc("velero_backup_last_successful_timestamp",
			"When the schedule's newest Completed backup completed, Unix time in seconds", []string{ScheduleLabel}, nil),
	}
}

type censusCollector struct {
	mu   sync.Mutex
	take CensusFunc
	// owner tells the latest UseCensus from earlier ones.
	owner int
	// lastSuccess is kept, like Velero's gauge, after the backups it came
	// from are deleted: an alert on its age must go on firing.
	lastSuccess map[string]time.Time

	backups, restores, lastSuccessDesc *prometheus.Desc
}

// backupSucceeded records a backup of schedule that completed at t.
func (c *censusCollector) backupSucceeded(schedule string, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastSuccess[schedule] = t
}

func (c *censusCollector) forgetSchedule(schedule string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.lastSuccess, schedule)
}

// Describe implements prometheus.Collector.
func (c *censusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.backups
	ch <- c.restores
	ch <- c.lastSuccessDesc
}

// Collect implements prometheus.Collector. A census that fails leaves the
// totals out of this scrape rather than failing it.
func (c *censusCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	take := c.take
	c.mu.Unlock()
	if take != nil {
		ctx, cancel := context.WithTimeout(context.Background(), censusTimeout)
		got, err := take(ctx)
		cancel()
		if err == nil {
			ch <- prometheus.MustNewConstMetric(c.backups, prometheus.GaugeValue, float64(got.Backups))
			ch <- prometheus.MustNewConstMetric(c.restores, prometheus.GaugeValue, float64(got.Restores))
			c.mu.Lock()
			// As Velero's recount: the newest Completed backup's time,
			// lower than before if the newest was deleted.
			for schedule, t := range got.NewestCompleted {
				c.lastSuccess[schedule] = t
			}
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for schedule, t := range c.lastSuccess {
		ch <- prometheus.MustNewConstMetric(c.lastSuccessDesc, prometheus.GaugeValue, float64(t.Unix()), schedule)
	}
}

// CensusOf counts backups and restores as Velero's recount does: every
// Backup and Restore, and per schedule label value ("" for backups made
// by hand) the completion time of the newest Completed backup.
func CensusOf(backups []v1.Backup, restores int) Census {
	c := Census{Backups: len(backups), Restores: restores, NewestCompleted: map[string]time.Time{}}
	for i := range backups {
		b := &backups[i]
		if b.Status.Phase != v1.BackupPhaseCompleted || b.Status.CompletionTimestamp == nil {
			continue
		}
		schedule := b.Labels[v1.ScheduleNameLabel]
		if t := b.Status.CompletionTimestamp.Time; t.After(c.NewestCompleted[schedule]) {
			c.NewestCompleted[schedule] = t
		}
	}
	return c
}
