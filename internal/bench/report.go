package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one figure of the report.
type Row struct {
	Section string  `json:"section"` // e.g. "admission"
	Name    string  `json:"name"`    // what was measured
	Fsync   string  `json:"fsync,omitempty"`
	Value   float64 `json:"value"`
	Unit    string  `json:"unit"`
	// Summary holds the latency distribution where one was measured.
	Summary *Summary `json:"summary,omitempty"`
	// Ratio is Value against the baseline named by RatioOf, measured in
	// the same run.
	Ratio   float64 `json:"ratio,omitempty"`
	RatioOf string  `json:"ratio_of,omitempty"`
	// Target is the goal this figure is held to, and Met whether it was.
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
	// ServerCPU and GenCPU are the cores the measured process and the load
	// generator used during the measurement (1.0 = one core busy).
	ServerCPU float64 `json:"server_cpu_cores,omitempty"`
	GenCPU    float64 `json:"generator_cpu_cores,omitempty"`
	// OtherCPU is what the rest of the machine used meanwhile: on a shared
	// machine, a figure taken while others were busy is noisy.
	OtherCPU float64 `json:"other_cpu_cores,omitempty"`
	// ServerCPUPerOp is the target's CPU time per operation in µs: less
	// sensitive to what else runs on the machine than a rate.
	ServerCPUPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
	Note           string  `json:"note,omitempty"`
}

// Report is the whole run: the machine, the settings and every figure.
type Report struct {
	Machine  Machine           `json:"machine"`
	Started  time.Time         `json:"started"`
	Seconds  float64           `json:"seconds"`
	Settings map[string]string `json:"settings"`
	Rows     []*Row            `json:"rows"`
	Notes    []string          `json:"notes,omitempty"`
}

// use records the CPU split of a measurement on the row.
func (x *Row) use(u usage) *Row {
	x.ServerCPU, x.GenCPU, x.OtherCPU = u.srv, u.gen, u.other
	if s := x.Summary; s != nil && s.Rate > 0 {
		x.ServerCPUPerOp = u.srv / s.Rate * 1e6
	}
	return x
}

func (r *Report) add(row Row) *Row {
	x := &row
	r.Rows = append(r.Rows, x)
	return x
}

// find returns the first row of section and name with the given fsync, or nil.
func (r *Report) find(section, name, fsync string) *Row {
	for _, x := range r.Rows {
		if x.Section == section && x.Name == name && x.Fsync == fsync {
			return x
		}
	}
	return nil
}

func (r *Report) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// relate sets row's ratio against base (nil or zero base leaves it unset).
func relate(row, base *Row, of string) {
	if row == nil || base == nil || base.Value == 0 {
		return
	}
	row.Ratio = row.Value / base.Value
	row.RatioOf = of
}

// goal records a target and whether the figure met it.
func goal(row *Row, target string, met bool) {
	if row == nil {
		return
	}
	row.Target = target
	row.Met = &met
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// WriteTable prints the header and one line per figure.
func (r *Report) WriteTable(w io.Writer) error {
	m := r.Machine
	fmt.Fprintf(w, "jobgate bench — %s\n", r.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "machine: %d cores (%s), GOMAXPROCS %d, %s, %s, %d MiB RAM\n",
		m.Cores, m.CPUModel, m.GOMAXPROCS, m.GoVersion, m.Kernel, m.MemTotalMiB)
	fmt.Fprintf(w, "load average at start: %s\n", m.LoadAvg)
	fmt.Fprintf(w, "load generator: %s\n", m.Generator)
	keys := make([]string, 0, len(r.Settings))
	for k := range r.Settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var set []string
	for _, k := range keys {
		set = append(set, k+"="+r.Settings[k])
	}
	fmt.Fprintf(w, "settings: %s\n\n", strings.Join(set, " "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "section\tfigure\tfsync\tvalue\tp50 ms\tp99 ms\tp99.9 ms\tratio\ttarget\tcpu srv/gen/other\tsrv µs/op\t")
	for _, x := range r.Rows {
		p50, p99, p999 := "", "", ""
		if s := x.Summary; s != nil && s.Ops > 0 && s.P50 > 0 {
			p50, p99, p999 = num(s.P50), num(s.P99), num(s.P999)
		}
		ratio := ""
		if x.RatioOf != "" {
			ratio = fmt.Sprintf("%.2f× %s", x.Ratio, x.RatioOf)
		}
		target := x.Target
		if x.Met != nil {
			if *x.Met {
				target += " ok"
			} else {
				target += " MISSED"
			}
		}
		cpu := ""
		if x.ServerCPU > 0 || x.GenCPU > 0 {
			cpu = fmt.Sprintf("%.2f/%.2f/%.2f", x.ServerCPU, x.GenCPU, x.OtherCPU)
		}
		perOp := ""
		if x.ServerCPUPerOp > 0 {
			perOp = num(x.ServerCPUPerOp)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			x.Section, x.Name, x.Fsync, num(x.Value), x.Unit, p50, p99, p999, ratio, target, cpu, perOp)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, x := range r.Rows {
		if x.Note != "" {
			fmt.Fprintf(w, "  [%s / %s] %s\n", x.Section, x.Name, x.Note)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// num formats a figure with about three significant digits.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v <= -100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10 || v <= -10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1 || v <= -1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
