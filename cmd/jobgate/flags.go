package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/failpoint"
)

// settingFlags are the flags every service command accepts. They override
// the YAML file and the environment.
type settingFlags struct {
	configPath string
	set        map[string]func(*config.Config, string) error
}

func newFlagSet(name string, m *Main) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	return fs
}

// bindSettings registers --config and one flag per common setting.
func bindSettings(fs *flag.FlagSet) *settingFlags {
	sf := &settingFlags{set: map[string]func(*config.Config, string) error{}}
	fs.StringVar(&sf.configPath, "config", "", "YAML config file (see configs/)")
	str := func(name, usage string, apply func(*config.Config, string)) {
		fs.String(name, "", usage)
		sf.set[name] = func(c *config.Config, v string) error { apply(c, v); return nil }
	}
	dur := func(name, usage string, apply func(*config.Config, time.Duration)) {
		fs.String(name, "", usage)
		sf.set[name] = func(c *config.Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("--%s: %w", name, err)
			}
			apply(c, d)
			return nil
		}
	}
	str("http-addr", "gateway listen address (JOBGATE_HTTP_ADDR)", func(c *config.Config, v string) { c.HTTPAddr = v })
	str("ops-addr", "a process without the gateway serves /healthz, /readyz and /metrics here (JOBGATE_OPS_ADDR)", func(c *config.Config, v string) { c.OpsAddr = v })
	str("data-dir", "data directory (JOBGATE_DATA_DIR)", func(c *config.Config, v string) { c.DataDir = v })
	str("nats", "external NATS URLs, comma-separated (JOBGATE_NATS_URL)", func(c *config.Config, v string) { c.NATS.URL = v })
	str("nats-listen", "embedded server also accepts NATS clients here (JOBGATE_NATS_LISTEN)", func(c *config.Config, v string) { c.NATS.Listen = v })
	str("nats-creds", "NATS credentials file", func(c *config.Config, v string) { c.NATS.CredsFile = v })
	str("nats-nkey", "NATS NKey seed file", func(c *config.Config, v string) { c.NATS.NKeyFile = v })
	str("nats-user", "NATS user", func(c *config.Config, v string) { c.NATS.User = v })
	str("nats-password", "NATS password", func(c *config.Config, v string) { c.NATS.Password = v })
	str("nats-tls-ca", "CA file for NATS TLS (JOBGATE_NATS_TLS_CA)", func(c *config.Config, v string) { c.NATS.TLSCA = v })
	str("nats-tls-cert", "client certificate for NATS TLS (JOBGATE_NATS_TLS_CERT)", func(c *config.Config, v string) { c.NATS.TLSCert = v })
	str("nats-tls-key", "client key for NATS TLS (JOBGATE_NATS_TLS_KEY)", func(c *config.Config, v string) { c.NATS.TLSKey = v })
	str("log-format", "text or json (JOBGATE_LOG_FORMAT)", func(c *config.Config, v string) { c.LogFormat = v })
	str("log-level", "debug, info, warn or error", func(c *config.Config, v string) { c.LogLevel = v })
	str("failpoints", "fault injection (JOBGATE_FAILPOINTS)", func(c *config.Config, v string) { c.Failpoints = v })
	dur("job-ttl", "job record lifetime (JOBGATE_JOB_TTL)", func(c *config.Config, d time.Duration) { c.JobTTL = d })
	dur("result-ttl", "result file lifetime (JOBGATE_RESULT_TTL)", func(c *config.Config, d time.Duration) { c.ResultTTL = d })
	dur("render-timeout", "budget of one render attempt (JOBGATE_RENDER_TIMEOUT)", func(c *config.Config, d time.Duration) { c.RenderTimeout = d })
	fs.Int("replicas", 0, "replicas of streams and buckets (1 embedded, 3 on a cluster)")
	sf.set["replicas"] = func(c *config.Config, v string) error {
		_, err := fmt.Sscan(v, &c.NATS.Replicas)
		return err
	}
	fs.Int("max-attempts", 0, "render attempts per job (JOBGATE_MAX_ATTEMPTS)")
	sf.set["max-attempts"] = func(c *config.Config, v string) error {
		_, err := fmt.Sscan(v, &c.MaxAttempts)
		return err
	}
	fs.Bool("sync-always", true, "embedded: fsync every write before acknowledging it (--sync-always=false: every 2 minutes)")
	sf.set["sync-always"] = func(c *config.Config, v string) error { c.NATS.SyncAlways = v == "true"; return nil }
	fs.Bool("dev", false, "serve: enable development helpers (the page's /dev/token login)")
	sf.set["dev"] = func(c *config.Config, v string) error { c.Dev = v == "true"; return nil }
	return sf
}

// load builds the config: defaults, then the YAML file, then the
// environment, then the flags given on the command line; then validates it.
func (sf *settingFlags) load(fs *flag.FlagSet, getenv func(string) string) (*config.Config, error) {
	cfg := config.Default()
	if sf.configPath != "" {
		if err := cfg.LoadFile(sf.configPath); err != nil {
			return nil, err
		}
	}
	if err := cfg.LoadEnv(getenv); err != nil {
		return nil, err
	}
	var errs []error
	fs.Visit(func(f *flag.Flag) {
		if apply, ok := sf.set[f.Name]; ok {
			errs = append(errs, apply(&cfg, f.Value.String()))
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, &usageError{err.Error()}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid settings: %w", err)
	}
	if _, err := failpoint.Parse(cfg.Failpoints); err != nil {
		return nil, &usageError{err.Error()}
	}
	return &cfg, nil
}

// parse parses args and maps flag errors to usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}
