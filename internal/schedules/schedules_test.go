package schedules

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// base is 2026-03-01 12:00:00 UTC, the "now" most cases count from.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestParseCron(t *testing.T) {
	valid := []string{"0 3 * * *", "*/15 * * * 1-5", "@every 1h", "@every 90s", "@daily", "@hourly", "  0 0 1 * *  "}
	for _, expr := range valid {
		if _, err := ParseCron(expr); err != nil {
			t.Errorf("ParseCron(%q): %v", expr, err)
		}
	}
	invalid := []struct{ expr, want string }{
		{"", "empty"},
		{"not a cron", "not a valid cron expression"},
		{"0 3 * *", "not a valid cron expression"},
		{"0 0 3 * * *", "not a valid cron expression"}, // six fields: Velero's parser wants five
		{"61 * * * *", "not a valid cron expression"},
		{"@every soon", "not a valid cron expression"},
		{"@fortnightly", "not a valid cron expression"},
		{"TZ=UTC", "time zone"},
		{"CRON_TZ=Europe/Berlin 0 3 * * *", "time zone"},
		{"0 0 30 2 *", "never matches"},
	}
	for _, tt := range invalid {
		_, err := ParseCron(tt.expr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseCron(%q) error = %v, want one containing %q", tt.expr, err, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), `"0 3 * * *"`) {
			t.Errorf("ParseCron(%q) error %q shows no example", tt.expr, err)
		}
	}
}

func TestNextRun(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	tests := []struct {
		name    string
		cron    string
		times   RunTimes
		now     time.Time
		wantAt  time.Time
		wantDue bool
	}{
		{
			name: "a new schedule runs at once, named by its creation",
			cron: "@every 1m", times: RunTimes{Created: base}, now: base.Add(10 * time.Second),
			wantAt: base, wantDue: true,
		},
		{
			name: "at once even when the cron would fire much later",
			cron: "0 3 * * *", times: RunTimes{Created: base}, now: base.Add(5 * time.Second),
			wantAt: base, wantDue: true,
		},
		{
			name: "at once despite a clock behind the API server's",
			cron: "@every 1h", times: RunTimes{Created: base}, now: base.Add(-2 * time.Second),
			wantAt: base, wantDue: true,
		},
		{
			name: "a schedule enabled long after creation is named by its latest firing",
			cron: "0 3 * * *", times: RunTimes{Created: base.Add(-72 * time.Hour)}, now: base,
			wantAt: time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC), wantDue: true,
		},
		{
			name: "not yet due after a backup",
			cron: "@every 1m", times: RunTimes{Created: base.Add(-time.Hour), LastBackup: base}, now: base.Add(30 * time.Second),
			wantAt: base.Add(time.Minute), wantDue: false,
		},
		{
			name: "due exactly at the firing time",
			cron: "@every 1m", times: RunTimes{Created: base.Add(-time.Hour), LastBackup: base}, now: base.Add(time.Minute),
			wantAt: base.Add(time.Minute), wantDue: true,
		},
		{
			name: "missed firings make one run, named by the latest",
			cron: "0 * * * *", times: RunTimes{Created: base.Add(-48 * time.Hour), LastBackup: base.Add(-5 * time.Hour)}, now: base.Add(30 * time.Minute),
			wantAt: base, wantDue: true,
		},
		{
			name: "a skip after the last backup counts from the skip",
			cron: "0 3 * * *", times: RunTimes{Created: base.Add(-96 * time.Hour), LastBackup: time.Date(2026, 2, 27, 3, 0, 0, 0, time.UTC), LastSkipped: base},
			now:    base.Add(time.Hour),
			wantAt: time.Date(2026, 3, 2, 3, 0, 0, 0, time.UTC), wantDue: false,
		},
		{
			name: "a skip at creation waits for the first firing",
			cron: "@every 1h", times: RunTimes{Created: base, LastSkipped: base}, now: base.Add(time.Minute),
			wantAt: base.Add(time.Hour), wantDue: false,
		},
		{
			name: "a backup after the last skip counts from the backup",
			cron: "@every 1h", times: RunTimes{Created: base.Add(-5 * time.Hour), LastSkipped: base.Add(-3 * time.Hour), LastBackup: base.Add(-30 * time.Minute)},
			now:    base,
			wantAt: base.Add(30 * time.Minute), wantDue: false,
		},
		{
			name: "cron fields are UTC whatever the zone of the stored times",
			cron: "0 3 * * *", times: RunTimes{Created: base.Add(-96 * time.Hour), LastBackup: time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC).In(berlin)},
			now:    time.Date(2026, 3, 2, 2, 30, 0, 0, time.UTC).In(berlin),
			wantAt: time.Date(2026, 3, 2, 3, 0, 0, 0, time.UTC), wantDue: false,
		},
		{
			name: "a frequent schedule after a long outage runs once, near now",
			cron: "@every 1s", times: RunTimes{Created: base.Add(-60 * 24 * time.Hour), LastBackup: base.Add(-30 * 24 * time.Hour)}, now: base,
			wantAt: base, wantDue: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sched, err := ParseCron(tt.cron)
			if err != nil {
				t.Fatal(err)
			}
			at, due := NextRun(sched, tt.times, tt.now)
			if !at.Equal(tt.wantAt) || due != tt.wantDue {
				t.Errorf("NextRun = %s, due %v; want %s, due %v", at.UTC(), due, tt.wantAt.UTC(), tt.wantDue)
			}
		})
	}
}

func TestTimesOf(t *testing.T) {
	s := &v1.Schedule{}
	s.CreationTimestamp = metav1.NewTime(base)
	if got := TimesOf(s); got != (RunTimes{Created: base}) {
		t.Errorf("TimesOf a new schedule = %+v", got)
	}
	backup, skipped := metav1.NewTime(base.Add(time.Hour)), metav1.NewTime(base.Add(2*time.Hour))
	s.Status.LastBackup, s.Status.LastSkipped = &backup, &skipped
	if got, want := TimesOf(s), (RunTimes{Created: base, LastBackup: backup.Time, LastSkipped: skipped.Time}); got != want {
		t.Errorf("TimesOf = %+v, want %+v", got, want)
	}
}
