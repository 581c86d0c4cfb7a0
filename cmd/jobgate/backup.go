package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/jobgate/jobgate/internal/backup"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/internal/secretfile"
	"github.com/jobgate/jobgate/system"
	"github.com/nats-io/nats.go"
)

// runBackup copies a running deployment's streams (and, on one box, its
// data dir's secrets) into an empty directory (docs/operations.md).
func (m *Main) runBackup(ctx context.Context, args []string) error {
	fs := newFlagSet("backup", m)
	sf := bindSettings(fs)
	to := fs.String("to", "", "the backup directory (created, or empty)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *to == "" {
		return &usageError{"backup: --to DIR is required"}
	}
	cfg, err := sf.load(fs, m.Getenv)
	if err != nil {
		return err
	}
	nc, onBox, err := operatorConn(fs, cfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	opts := backup.Options{To: *to, Version: binaryVersion(), Log: m.toolLog()}
	if onBox {
		opts.DataDir = cfg.DataDir
	}
	man, err := backup.Backup(ctx, nc, opts)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	var total int64
	for _, s := range man.Streams {
		total += s.Bytes
	}
	fmt.Fprintf(m.Stdout, "backed up %d streams (%d bytes) and %d secret files to %s\n", len(man.Streams), total, len(man.Secrets), *to)
	return nil
}

// runRestore puts a backup into an empty data dir (the embedded server's
// store and its secrets), or into an operator's NATS (--nats) that has
// none of its streams.
func (m *Main) runRestore(ctx context.Context, args []string) error {
	fs := newFlagSet("restore", m)
	sf := bindSettings(fs)
	from := fs.String("from", "", "the backup directory")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *from == "" {
		return &usageError{"restore: --from DIR is required"}
	}
	cfg, err := sf.load(fs, m.Getenv)
	if err != nil {
		return err
	}
	man, err := backup.Open(*from) // every file checked before anything is written
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if !cfg.Embedded() {
		nc, _, err := operatorConn(fs, cfg)
		if err != nil {
			return err
		}
		defer nc.Close()
		if err := backup.Restore(ctx, nc, *from, man, m.toolLog()); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		fmt.Fprintf(m.Stdout, "restored %d streams to %s; the deployment's secrets are in %s\n", len(man.Streams), cfg.NATS.URL, filepath.Join(*from, "secrets"))
		return nil
	}
	if err := emptyDataDir(cfg.DataDir); err != nil {
		return err
	}
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: cfg.Path("nats"), MaxStore: man.StorageReserve()})
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer emb.Shutdown()
	nc, err := emb.Connect("jobgate-restore")
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer nc.Close()
	if err := backup.Restore(ctx, nc, *from, man, m.toolLog()); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := backup.RestoreSecrets(*from, man, cfg.DataDir); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	fmt.Fprintf(m.Stdout, "restored %d streams and %d secret files into %s: start `jobgate serve --data-dir %s`\n", len(man.Streams), len(man.Secrets), cfg.DataDir, cfg.DataDir)
	return nil
}

// operatorConn connects to the deployment's NATS as an operator: with the
// settings' credentials, or, on one box (no credential given, the data
// dir's subscriber secret present), as the embedded server's operator
// user, at --nats or the URL serve left in the data dir. onBox says the
// latter.
func operatorConn(fs *flag.FlagSet, cfg *config.Config) (nc *nats.Conn, onBox bool, err error) {
	url := cfg.NATS.URL
	if url == "" {
		url = system.ServingNATSURL(cfg.DataDir)
	}
	if url == "" {
		return nil, false, &usageError{fmt.Sprintf("%s: give --nats URL (serve's --nats-listen on one box): no serve with a NATS listener left its URL in %s", fs.Name(), cfg.DataDir)}
	}
	cc := natsjs.ConnectConfig{URL: url, Name: "jobgate-" + fs.Name(), CredsFile: cfg.NATS.CredsFile, NKeyFile: cfg.NATS.NKeyFile,
		User: cfg.NATS.User, Password: cfg.NATS.Password, TLSCA: cfg.NATS.TLSCA, TLSCert: cfg.NATS.TLSCert, TLSKey: cfg.NATS.TLSKey}
	if cc.CredsFile == "" && cc.NKeyFile == "" && cc.User == "" {
		// One box: read the data dir's secret, never create one.
		secret, err := secretfile.Read(natsserver.SubscriberSecretFile(cfg.DataDir))
		if err == nil {
			cc.User, cc.Password, onBox = natsserver.OperatorUser, natsserver.OperatorPassword(secret), true
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, false, err
		}
	}
	nc, err = natsjs.Connect(cc)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", fs.Name(), err)
	}
	return nc, onBox, nil
}

// emptyDataDir refuses a data dir that holds anything: a restore never
// mixes a backup with another deployment's state.
func emptyDataDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("restore: %w: the data dir %s holds %s and more: restore into an empty one", backup.ErrNotEmpty, dir, entries[0].Name())
	}
	return nil
}

// toolLog is the log of an operator's tool: info and up, on stderr.
func (m *Main) toolLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// binaryVersion is the module version the binary was built from.
func binaryVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return bi.Main.Version + " " + s.Value
			}
		}
		return bi.Main.Version
	}
	return "unknown"
}
