// Package schedules holds the timing rules of a Schedule: how its cron
// expression is read and when its next backup is due. The schedule
// controller runs backups by these rules and `lifeboat schedule create` and
// `describe` check and predict them, so both import this package rather
// than the CLI importing the controllers.
//
// Entry points: ParseCron, NextRun, and TimesOf for the times NextRun
// counts from.
package schedules

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// maxTickWalk bounds the walk over missed runs (two months of @every 1m).
const maxTickWalk = 100_000

// ParseCron parses a schedule as Velero does: five fields (minute, hour,
// day of month, month, day of week) or a descriptor such as @daily or
// @every 6h. Times are UTC.
func ParseCron(expr string) (sched cron.Schedule, err error) {
	const example = `; use five fields, e.g. "0 3 * * *" for 03:00 UTC every day, or a descriptor such as "@daily" or "@every 6h"`
	expr = strings.TrimSpace(expr)
	switch {
	case expr == "":
		return nil, errors.New("empty" + example)
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		// Velero documents schedules as UTC and its parser (robfig/cron v1)
		// knows no CRON_TZ; a zone here would not mean the same there.
		return nil, fmt.Errorf("%q: time zone prefixes are not supported, schedules run in UTC%s", expr, example)
	}
	// The parser is third-party and has panicked on malformed input before;
	// a user's typo must not take the server down.
	defer func() {
		if p := recover(); p != nil {
			sched, err = nil, fmt.Errorf("%q is not a valid cron expression (%v)%s", expr, p, example)
		}
	}()
	sched, err = cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("%q is not a valid cron expression: %w%s", expr, err, example)
	}
	if sched.Next(time.Now().UTC()).IsZero() {
		return nil, fmt.Errorf("%q never matches a date%s", expr, example)
	}
	return sched, nil
}

// RunTimes are the moments a schedule's next run is counted from; zero
// when unset.
type RunTimes struct {
	Created, LastBackup, LastSkipped time.Time
}

// TimesOf reads a Schedule's RunTimes from its creation time and status.
func TimesOf(s *v1.Schedule) RunTimes {
	t := RunTimes{Created: s.CreationTimestamp.Time}
	if s.Status.LastBackup != nil {
		t.LastBackup = s.Status.LastBackup.Time
	}
	if s.Status.LastSkipped != nil {
		t.LastSkipped = s.Status.LastSkipped.Time
	}
	return t
}

// NextRun says when the schedule's next backup is due and whether it is
// due now. A schedule that has never run nor skipped is due at once (named
// by its creation time, or by the latest time it fired since). Otherwise
// the run is the first firing after the later of the last backup and the
// last skip; several missed firings (an outage, a long pause) make one
// run, named by the latest of them: Velero does not catch up either.
func NextRun(sched cron.Schedule, t RunTimes, now time.Time) (at time.Time, due bool) {
	now = now.UTC()
	last := t.LastBackup
	if t.LastSkipped.After(last) {
		last = t.LastSkipped
	}
	first := last.IsZero()
	if first {
		last = t.Created
	}
	next := sched.Next(last.UTC())
	switch {
	case next.IsZero():
		return time.Time{}, false
	case next.After(now) && first:
		return last.UTC().Truncate(time.Second), true
	case next.After(now):
		return next, false
	}
	latest, ok := latestFiring(sched, next, now)
	if !ok {
		// Too many missed firings to walk (a frequent schedule after a long
		// outage): start again shortly before now.
		if restart := sched.Next(now.Add(-2 * time.Hour)); !restart.IsZero() && !restart.After(now) {
			latest, _ = latestFiring(sched, restart, now)
		}
	}
	return latest, true
}

// latestFiring walks from fired, a time sched fires not after now, to the
// last such time; ok is false when that takes more than maxTickWalk steps.
func latestFiring(sched cron.Schedule, fired, now time.Time) (time.Time, bool) {
	for range maxTickWalk {
		next := sched.Next(fired)
		if next.IsZero() || next.After(now) {
			return fired, true
		}
		fired = next
	}
	return fired, false
}
