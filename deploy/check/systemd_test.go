package check

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// systemdDir holds the units (deploy/systemd).
var systemdDir = filepath.Join(root, "deploy", "systemd")

// unitBinary is where the units expect jobgate (docs/operations.md, "systemd").
const unitBinary = "/usr/local/bin/jobgate"

// unitLine is one Key=value of a unit file, drop-in or env file.
type unitLine struct {
	file  string
	n     int
	key   string
	value string
}

// readUnit reads a unit-like file's settings; commented lines too when
// withComments (an env example's "#JOBGATE_X=" is a setting to offer).
func readUnit(t *testing.T, path string, withComments bool) []unitLine {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []unitLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if c, ok := strings.CutPrefix(l, "#"); ok && withComments {
			l = strings.TrimSpace(c)
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "[") || strings.ContainsAny(k, " \t") {
			continue
		}
		out = append(out, unitLine{file: filepath.Base(path), n: n, key: k, value: v})
	}
	return out
}

func systemdFiles(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(systemdDir, pattern))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no %s in %s", pattern, systemdDir)
	return files
}

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// jobgateArgs is the jobgate command line an ExecStart runs: after the
// binary, or inside a `/bin/sh -c '... jobgate ...'`. Nil when it runs
// something else (the backup's find).
func jobgateArgs(execStart string) []string {
	if inner, ok := strings.CutPrefix(execStart, "/bin/sh -c '"); ok {
		execStart = strings.TrimPrefix(strings.TrimSuffix(inner, "'"), "exec ")
	}
	f := strings.Fields(execStart)
	if len(f) == 0 || f[0] != unitBinary {
		return nil
	}
	return f[1:]
}

// Every unit, drop-in and env example passes only settings jobgate reads
// and runs only jobgate commands and flags it has; every service keeps
// the hardening docs/operations.md promises (the units repeat it: systemd
// has no include, so this keeps the copies alike).
func TestTheSystemdUnitsPassOnlyJobgatesSettings(t *testing.T) {
	hardening := map[string]string{
		"DynamicUser": "yes", "ProtectSystem": "strict", "NoNewPrivileges": "yes", "PrivateTmp": "yes",
		"CapabilityBoundingSet": "", "AmbientCapabilities": "", "ProtectHome": "yes", "PrivateDevices": "yes",
		"RestrictSUIDSGID": "yes", "SystemCallFilter": "@system-service", "MemoryDenyWriteExecute": "yes",
	}
	services := systemdFiles(t, "*.service")
	require.GreaterOrEqual(t, len(services), 6, "serve, four components and the backup")
	commands := map[string]bool{}
	for _, f := range services {
		lines := readUnit(t, f, false)
		set := map[string][]string{}
		for _, l := range lines {
			set[l.key] = append(set[l.key], l.value)
			switch l.key {
			case "ExecStart", "ExecStartPost", "ExecStartPre", "ExecStop", "ExecReload":
				if args := jobgateArgs(l.value); args != nil {
					checkCommand(t, l.file+":"+itoa(l.n), args)
					commands[args[0]] = true
				}
			case "Environment":
				name, _, _ := strings.Cut(strings.Trim(l.value, `"`), "=")
				checkEnv(t, l.file+":"+itoa(l.n), []string{name})
			}
		}
		for k, want := range hardening {
			require.Contains(t, set[k], want, "%s: %s=%s missing", filepath.Base(f), k, want)
		}
		require.NotEmpty(t, set["StateDirectory"], "%s: no StateDirectory", filepath.Base(f))
	}
	for _, c := range []string{"serve", "gateway", "dispatcher", "notifier", "renderer", "backup"} {
		require.True(t, commands[c], "no unit runs jobgate %s", c)
	}
	for _, pattern := range []string{"*.env.example", "*.conf.example"} {
		for _, f := range systemdFiles(t, pattern) {
			for _, l := range readUnit(t, f, true) {
				name := l.key
				if l.key == "Environment" {
					name, _, _ = strings.Cut(l.value, "=")
				}
				if envName.MatchString(name) {
					checkEnv(t, l.file+":"+itoa(l.n), []string{name})
				}
			}
		}
	}
}

// The reading above finds what a unit passes, or the check would pass
// on nothing.
func TestTheUnitReaderFindsSettingsAndCommands(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.service")
	require.NoError(t, os.WriteFile(p, []byte("[Service]\nExecStart=/bin/sh -c 'exec /usr/local/bin/jobgate backup --to /x'\nEnvironment=JOBGATE_MADE_UP=1\n# Environment=JOBGATE_COMMENTED=1\n"), 0o644))
	lines := readUnit(t, p, false)
	require.Len(t, lines, 2)
	require.Equal(t, []string{"backup", "--to", "/x"}, jobgateArgs(lines[0].value))
	require.Equal(t, "JOBGATE_MADE_UP=1", lines[1].value)
	require.False(t, knownEnv(t)["JOBGATE_MADE_UP"])
	require.Len(t, readUnit(t, p, true), 3)
	require.Nil(t, jobgateArgs("/usr/bin/find /x -delete"))
}

// systemd itself accepts the units: systemd-analyze verify finds no
// unknown key, bad value or missing program (jobgate at its place is the
// built binary), drop-ins included; and each service's exposure, as
// systemd-analyze security rates it offline, stays at or under 2.0 ("OK").
func TestSystemdAcceptsTheUnits(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is missing: scripts/ensure-systemd.sh installs it (make test runs it)")
		}
		t.Skip("systemd-analyze is missing (apt-get install systemd, or scripts/ensure-systemd.sh): the units are not verified")
	}
	dir := t.TempDir()
	bin := jobgate(t)
	var units []string
	for _, pattern := range []string{"*.service", "*.timer"} {
		for _, f := range systemdFiles(t, pattern) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			b = bytes.ReplaceAll(b, []byte(unitBinary), []byte(bin))
			require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644))
			units = append(units, filepath.Base(f))
		}
	}
	// The credentials drop-in, on every component as the docs install it.
	dropIn, err := os.ReadFile(filepath.Join(systemdDir, "nats-credentials.conf.example"))
	require.NoError(t, err)
	for _, c := range []string{"gateway", "dispatcher", "notifier", "renderer"} {
		d := filepath.Join(dir, "jobgate-"+c+".service.d")
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "nats-credentials.conf"), dropIn, 0o644))
	}
	cmd := exec.Command(analyze, append([]string{"verify", "--man=false"}, units...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify:\n%s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify warns")

	for _, u := range units {
		if !strings.HasSuffix(u, ".service") {
			continue
		}
		cmd := exec.Command(analyze, "security", "--offline=true", "--man=false", "--threshold=20", u)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		last := strings.TrimSpace(string(out))
		if i := strings.LastIndex(last, "\n"); i >= 0 {
			last = last[i+1:]
		}
		require.NoError(t, err, "%s: exposure over 2.0:\n%s", u, out)
		t.Log(last)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
