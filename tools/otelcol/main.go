// Command otelcol is the smallest OpenTelemetry Collector the end-to-end
// tracing test (test/tracetest) needs: the OTLP receiver and the file
// exporter, nothing else, so that a cold build stays short enough for CI
// (a few minutes). The Collector's own telemetry is a logger on stderr
// and no-op metrics and traces: the configurable kind (otelconftelemetry
// and its exporters) would add to the build and the test reads none of
// it. scripts/ensure-otelcol.sh builds it into bin/tools/otelcol.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol", Description: "jobgate's test collector (OTLP in, OTLP JSON file out)", Version: "0.161.0"},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				// env: the scheme of a bare ${VAR}, which the resolver requires.
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
				DefaultScheme:     "env",
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func factories() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap(otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, fmt.Errorf("receivers: %w", err)
	}
	exporters, err := otelcol.MakeFactoryMap(fileexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, fmt.Errorf("exporters: %w", err)
	}
	return otelcol.Factories{
		Receivers: receivers,
		Exporters: exporters,
		// The service insists on a telemetry factory; this one has no
		// settings (a config must leave service.telemetry out) and logs
		// to stderr, where the test shows it on failure.
		Telemetry: telemetry.NewFactory(
			func() component.Config { return &struct{}{} },
			telemetry.WithCreateLogger(func(_ context.Context, s telemetry.LoggerSettings, _ component.Config) (*zap.Logger, component.ShutdownFunc, error) {
				cfg := zap.NewProductionConfig()
				cfg.Encoding, cfg.OutputPaths, cfg.ErrorOutputPaths = "console", []string{"stderr"}, []string{"stderr"}
				cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
				build := s.BuildZapLogger
				if build == nil {
					build = zap.Config.Build
				}
				l, err := build(cfg)
				if err != nil {
					return nil, nil, fmt.Errorf("logger: %w", err)
				}
				return l, func(context.Context) error { _ = l.Sync(); return nil }, nil
			}),
		),
	}, nil
}
