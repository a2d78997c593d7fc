package cli

import (
	"fmt"
	"io"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

var scheduleKind = kindSpec[v1.Schedule, *v1.Schedule, *v1.ScheduleList]{
	word:       "schedule",
	newList:    func() *v1.ScheduleList { return &v1.ScheduleList{} },
	items:      func(l *v1.ScheduleList) *[]v1.Schedule { return &l.Items },
	printTable: (*Factory).printScheduleTable,
}

func (f *Factory) printScheduleTable(w io.Writer, schedules []v1.Schedule) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tSTATUS\tCREATED\tSCHEDULE\tBACKUP TTL\tLAST BACKUP\tSELECTOR\tPAUSED")
	for i := range schedules {
		s := &schedules[i]
		var created *metav1.Time
		if !s.CreationTimestamp.IsZero() {
			created = &s.CreationTimestamp
		}
		var last metav1.Time
		if s.Status.LastBackup != nil {
			last = *s.Status.LastBackup
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			s.Name,
			schedulePhase(s),
			f.formatTime(created),
			s.Spec.Schedule,
			templateTTL(s.Spec.Template.TTL.Duration),
			f.relativeTime(last.Time),
			metav1.FormatLabelSelector(s.Spec.Template.LabelSelector),
			strconv.FormatBool(s.Spec.Paused),
		)
	}
	return tw.Flush()
}

// schedulePhase shows "New" for a schedule the server has not seen yet.
func schedulePhase(s *v1.Schedule) v1.SchedulePhase {
	if s.Status.Phase == "" {
		return v1.SchedulePhaseNew
	}
	return s.Status.Phase
}

// templateTTL is the TTL each backup gets; 0 leaves it to the server.
func templateTTL(ttl time.Duration) string {
	if ttl == 0 {
		return "<default>"
	}
	return ttl.String()
}
