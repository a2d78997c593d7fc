package metrics

import "github.com/prometheus/client_golang/prometheus"

// InitSchedule makes the series of a schedule exist before its first
// backup, at 0, so that `increase()` and `absent()` see them from the
// start, as Velero does when its schedule controller sees a schedule. The
// server calls it with "" at start, for backups made by hand. The archive
// size, duration and last success time start with the first backup.
//
// velero_backup_last_status starts at 1. Velero sets it to 1 again each
// time it looks at the schedule (every minute), which hides a failed
// scheduled backup within a minute; Lifeboat sets it once, when the
// schedule first appears, so it keeps saying how the latest backup ended.
func InitSchedule(schedule string) {
	for _, c := range m.startAtZero() {
		c.WithLabelValues(schedule).Add(0)
	}
	for _, g := range []*prometheus.GaugeVec{m.backupItems, m.backupItemErrors} {
		g.WithLabelValues(schedule).Add(0)
	}
	for _, c := range m.csiCounters() {
		c.WithLabelValues(schedule, "").Add(0)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.initialised[schedule] {
		m.initialised[schedule] = true
		m.backupLastStatus.WithLabelValues(schedule).Set(lastStatusSuccess)
	}
}

// RemoveSchedule removes the series of a schedule that was deleted, as
// Velero does; a backup labelled with it later starts them again.
func RemoveSchedule(schedule string) {
	for _, c := range m.startAtZero() {
		c.DeleteLabelValues(schedule)
	}
	for _, g := range []*prometheus.GaugeVec{m.backupItems, m.backupItemErrors, m.backupLastStatus, m.backupTarballBytes} {
		g.DeleteLabelValues(schedule)
	}
	m.backupDuration.DeleteLabelValues(schedule)
	for _, c := range m.csiCounters() {
		c.DeleteLabelValues(schedule, "")
	}
	m.census.forgetSchedule(schedule)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.initialised, schedule)
}
