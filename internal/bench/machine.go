package bench

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Machine describes where the figures were taken.
type Machine struct {
	Cores       int    `json:"cores"`
	GOMAXPROCS  int    `json:"gomaxprocs"`
	GoVersion   string `json:"go_version"`
	CPUModel    string `json:"cpu_model"`
	Kernel      string `json:"kernel"`
	MemTotalMiB int64  `json:"mem_total_mib"`
	Generator   string `json:"generator"`
	// LoadAvg is the 1/5/15-minute load average when the run started; on
	// a shared machine it says how noisy the figures may be.
	LoadAvg string `json:"load_avg"`
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func probeMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), CPUModel: "unknown",
		Kernel: runtime.GOOS, LoadAvg: loadAvg()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "linux " + strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				m.MemTotalMiB = kb / 1024
			}
		}
	}
	return m
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// procCPU returns the CPU time (user + system) process pid has used so far.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name may contain spaces; fields start after its ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("malformed /proc stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14 utime
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15 stime
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// selfCPU is the CPU time this process has used (finer than /proc ticks).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procRSS returns the resident set size of pid in bytes.
func procRSS(pid int) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// dirBytes sums the sizes of the files under dir (apparent size) and the
// space they occupy on disk (allocated blocks).
func dirBytes(dir string) (apparent, allocated int64) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		apparent += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		}
		return nil
	})
	return apparent, allocated
}

// machineBusy returns the CPU time all processes of the machine have used
// (every /proc/stat state but idle and iowait).
func machineBusy() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest times are already in user
			continue
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / clockTicks
}

// cpuMeter measures the cores used by the target, by this process and by
// everything else on the machine over an interval.
type cpuMeter struct {
	pid              int
	start            time.Time
	srv0, gen0, all0 time.Duration
}

func startCPU(pid int) *cpuMeter {
	m := &cpuMeter{pid: pid, start: time.Now(), gen0: selfCPU(), all0: machineBusy()}
	if pid > 0 {
		m.srv0, _ = procCPU(pid)
	}
	return m
}

// usage is the average cores used during a measurement of secs seconds.
type usage struct{ srv, gen, other, secs float64 }

// add folds another measurement in (a time-weighted average).
func (u *usage) add(v usage) {
	t := u.secs + v.secs
	if t <= 0 {
		return
	}
	u.srv = (u.srv*u.secs + v.srv*v.secs) / t
	u.gen = (u.gen*u.secs + v.gen*v.secs) / t
	u.other = (u.other*u.secs + v.other*v.secs) / t
	u.secs = t
}

func (m *cpuMeter) cores() usage {
	el := time.Since(m.start).Seconds()
	if el <= 0 {
		return usage{}
	}
	u := usage{secs: el}
	if m.pid > 0 {
		s, _ := procCPU(m.pid)
		u.srv = (s - m.srv0).Seconds() / el
	}
	u.gen = (selfCPU() - m.gen0).Seconds() / el
	u.other = max(0, (machineBusy()-m.all0).Seconds()/el-u.srv-u.gen)
	return u
}
