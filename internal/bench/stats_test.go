package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercentileIsNearestRank(t *testing.T) {
	t.Parallel()
	var lat []time.Duration
	for i := 1; i <= 1000; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 500*time.Millisecond, Percentile(lat, 50))
	require.Equal(t, 990*time.Millisecond, Percentile(lat, 99))
	require.Equal(t, 999*time.Millisecond, Percentile(lat, 99.9))
	require.Equal(t, 1000*time.Millisecond, Percentile(lat, 100))
	require.Equal(t, time.Millisecond, Percentile(lat, 0))
	require.Equal(t, time.Duration(0), Percentile(nil, 50))
	require.Equal(t, 7*time.Millisecond, Percentile([]time.Duration{7 * time.Millisecond}, 99.9))
}

func TestSummarizeRateAndPercentiles(t *testing.T) {
	t.Parallel()
	lat := []time.Duration{4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond}
	s := Summarize(lat, 1, 2*time.Second)
	require.Equal(t, int64(4), s.Ops)
	require.Equal(t, int64(1), s.Errors)
	require.InDelta(t, 2.0, s.Rate, 1e-9)
	require.InDelta(t, 2.0, s.P50, 1e-9)
	require.InDelta(t, 4.0, s.P99, 1e-9)
	require.InDelta(t, 4.0, s.Max, 1e-9)
	require.Equal(t, Summary{}, Summarize(nil, 0, 0))
}

func TestSamplesOfRoundsSummarizeTogether(t *testing.T) {
	t.Parallel()
	var all Samples
	all.Add(Samples{Lat: []time.Duration{time.Millisecond}, Elapsed: time.Second})
	all.Add(Samples{Lat: []time.Duration{3 * time.Millisecond, 2 * time.Millisecond}, Errors: 2, FirstError: "boom", Elapsed: time.Second})
	s := all.Summary()
	require.Equal(t, int64(3), s.Ops)
	require.InDelta(t, 1.5, s.Rate, 1e-9)
	require.Equal(t, "boom", s.FirstError)
	require.InDelta(t, 2.0, s.P50, 1e-9)

	rs := []*recorder{{lat: []time.Duration{time.Millisecond}}, {}}
	rs[1].fail("first")
	rs[1].fail("second")
	got := collect(rs, time.Second)
	require.Equal(t, int64(2), got.Errors)
	require.Equal(t, "first", got.FirstError)
}

func TestUsageAddIsTimeWeighted(t *testing.T) {
	t.Parallel()
	var u usage
	u.add(usage{srv: 1, gen: 0.5, other: 0, secs: 1})
	u.add(usage{srv: 0.5, gen: 0.5, other: 1, secs: 3})
	require.InDelta(t, 0.625, u.srv, 1e-9)
	require.InDelta(t, 0.5, u.gen, 1e-9)
	require.InDelta(t, 0.75, u.other, 1e-9)
	require.InDelta(t, 4, u.secs, 1e-9)
}

func TestReportRatiosTargetsTableAndJSON(t *testing.T) {
	t.Parallel()
	rep := &Report{Machine: Machine{Cores: 2, GOMAXPROCS: 2, GoVersion: "go1.x", CPUModel: "cpu", Kernel: "k", Generator: "g"},
		Started: time.Unix(0, 0), Settings: map[string]string{"b": "2", "a": "1"}}
	floor := rep.add(Row{Section: SecFloor, Name: "floor", Fsync: "default", Value: 1000, Unit: "jobs/s"})
	s := Summary{Ops: 10, Rate: 700, P50: 1, P99: 2, P999: 3}
	adm := rep.add(Row{Section: SecAdmission, Name: "new", Fsync: "default", Value: 700, Unit: "jobs/s", Summary: &s}).
		use(usage{srv: 1.4, gen: 0.3, other: 0.1, secs: 1})
	relate(adm, floor, "floor")
	goal(adm, "≥ 0.60× floor", adm.Ratio >= 0.6)
	missed := rep.add(Row{Section: SecReplay, Name: "replay", Value: 800, Unit: "req/s", Note: "a note"})
	relate(missed, adm, "admission")
	goal(missed, "≥ 1.5× admission", missed.Ratio >= 1.5)
	relate(rep.add(Row{Section: SecStatus, Name: "no base"}), nil, "x")

	require.InDelta(t, 0.7, adm.Ratio, 1e-9)
	require.InDelta(t, 2000, adm.ServerCPUPerOp, 1e-6) // 1.4 cores / 700 per s
	require.Same(t, adm, rep.find(SecAdmission, "new", "default"))
	require.Nil(t, rep.find(SecAdmission, "new", "always"))

	var out bytes.Buffer
	require.NoError(t, rep.WriteTable(&out))
	text := out.String()
	require.Contains(t, text, "2 cores (cpu), GOMAXPROCS 2, go1.x")
	require.Contains(t, text, "settings: a=1 b=2")
	require.Contains(t, text, "0.70× floor")
	require.Contains(t, text, "≥ 0.60× floor ok")
	require.Contains(t, text, "≥ 1.5× admission MISSED")
	require.Contains(t, text, "1.40/0.30/0.10")
	require.Contains(t, text, "cpu srv/gen/other")
	require.Contains(t, text, "[replay / replay] a note")
	require.Equal(t, 1+1, strings.Count(text, "MISSED")+strings.Count(text, " ok|"))

	path := filepath.Join(t.TempDir(), "bench.json")
	require.NoError(t, rep.WriteJSON(path))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(data, &back))
	require.Len(t, back.Rows, 4)
	require.Equal(t, "≥ 0.60× floor", back.Rows[1].Target)
	require.True(t, *back.Rows[1].Met)
	require.False(t, *back.Rows[2].Met)
	require.InDelta(t, 2.0, back.Rows[1].Summary.P99, 1e-9)
}

func TestNumFormatsAboutThreeDigits(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{0: "0", 12345.6: "12346", 45.67: "45.7", 1.234: "1.23", 0.01234: "0.0123"} {
		require.Equal(t, want, num(v), "%v", v)
	}
}
