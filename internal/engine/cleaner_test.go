package engine

import (
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// Each retention left zero takes its own default; a set one, negative
// (keep forever) included, is kept.
func TestRetentionWithDefaults(t *testing.T) {
	t.Parallel()
	got := retentionWithDefaults(flowtype.Retention{})
	want := flowtype.Retention{
		Completed: flowtype.DefaultRetainCompleted,
		Failed:    flowtype.DefaultRetainFailed,
		Cancelled: flowtype.DefaultRetainCancelled,
	}
	if got != want {
		t.Errorf("zero retention: %+v, want the defaults %+v", got, want)
	}
	set := flowtype.Retention{Completed: time.Hour, Failed: -1, Cancelled: 2 * time.Minute}
	if got := retentionWithDefaults(set); got != set {
		t.Errorf("set retention: %+v, want it kept as %+v", got, set)
	}
	mixed := retentionWithDefaults(flowtype.Retention{Failed: -1})
	if mixed.Completed != flowtype.DefaultRetainCompleted || mixed.Failed != -1 || mixed.Cancelled != flowtype.DefaultRetainCancelled {
		t.Errorf("only Failed set: %+v, want Failed -1 and the other defaults", mixed)
	}
}

// The cleaner's and reporter's zero settings take their defaults; negative
// intervals (that loop is off) stay negative; a batch size below one is
// the default.
func TestConfigWithMaintenanceDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.withMaintenanceDefaults()
	if c.CleanInterval != DefaultCleanInterval || c.CleanBatch != DefaultCleanBatch ||
		c.ReportInterval != DefaultReportInterval || c.ReportRetention != DefaultReportRetention {
		t.Errorf("zero config: clean every %s in batches of %d, report every %s kept %s; want the defaults",
			c.CleanInterval, c.CleanBatch, c.ReportInterval, c.ReportRetention)
	}
	off := Config{CleanInterval: -1, CleanBatch: -5, ReportInterval: -1, ReportRetention: -1}.withMaintenanceDefaults()
	if off.CleanInterval != -1 || off.ReportInterval != -1 || off.ReportRetention != -1 {
		t.Errorf("negative settings: clean every %s, report every %s kept %s; want them left negative",
			off.CleanInterval, off.ReportInterval, off.ReportRetention)
	}
	if off.CleanBatch != DefaultCleanBatch {
		t.Errorf("batch -5: %d, want the default %d", off.CleanBatch, DefaultCleanBatch)
	}
}
