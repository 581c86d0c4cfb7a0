package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// spec is what one image is made of.
type spec struct {
	Binary  string    // the static jobgate binary
	Licence string    // the LICENSE file, copied into the image
	Created time.Time // SOURCE_DATE_EPOCH: every time in the image
	Info    binaryInfo
	Source  string // the repository, for the source label
}

// Settings the image's config gives jobgate through its environment
// (internal/config reads them): listen on every interface, since a
// container's loopback is its own, and keep the data in the volume.
var imageEnv = []string{
	"PATH=/usr/local/bin",
	"JOBGATE_HTTP_ADDR=0.0.0.0:8080",
	"JOBGATE_DATA_DIR=" + dataDir,
	"JOBGATE_LOG_FORMAT=json",
}

// buildImage assembles the image: a base layer (users, CA roots, /tmp,
// the data volume) and the binary's layer, with its config.
func buildImage(s spec) (v1.Image, error) {
	base, err := layer(baseEntries(), s.Created)
	if err != nil {
		return nil, err
	}
	appFiles, err := appEntries(s.Binary, s.Licence)
	if err != nil {
		return nil, err
	}
	app, err := layer(appFiles, s.Created)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "tools/image: users, CA roots, /tmp, " + dataDir}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "tools/image: " + binPath}},
	)
	if err != nil {
		return nil, fmt.Errorf("layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Created = v1.Time{Time: s.Created}
	cf.Author = "jobgate"
	cf.Config = v1.Config{
		Entrypoint: []string{binPath},
		Cmd:        []string{"serve"},
		Env:        imageEnv,
		User:       fmt.Sprintf("%d:%d", uid, gid),
		WorkingDir: dataDir,
		Volumes:    map[string]struct{}{dataDir: {}},
		// 8080 the API; 4222 only when JOBGATE_NATS_LISTEN=0.0.0.0:4222
		// lets workers and subscribers reach the embedded NATS server.
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "4222/tcp": {}},
		// The stop of serve drains in at most 25 s (docs/operations.md):
		// give it 30 (docker stop -t 30, terminationGracePeriodSeconds).
		StopSignal: "SIGTERM",
		// Docker's and Compose's health check of serve (OCI runtimes ignore
		// it; Kubernetes probes GET /readyz itself): jobgate health asks
		// the gateway's /readyz, the image having no shell and no curl. A
		// container running a component without a gateway overrides it
		// with --url on its ops address (deploy/compose does).
		Healthcheck: &v1.HealthConfig{
			Test:        []string{"CMD", "jobgate", "health", "--url", "http://127.0.0.1:8080/readyz"},
			Interval:    10 * time.Second,
			Timeout:     3 * time.Second,
			StartPeriod: 30 * time.Second,
			Retries:     3,
		},
		Labels: labels(s),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return img, nil
}

// labels are the OCI annotations' keys, on the config, where docker
// inspect and registries show them.
func labels(s spec) map[string]string {
	rev := s.Info.Revision
	if rev != "" && s.Info.Modified {
		rev += "-dirty"
	}
	return map[string]string{
		"org.opencontainers.image.title":       "jobgate",
		"org.opencontainers.image.description": "jobgate: admit expensive work exactly once, run it in workers, tell the user",
		"org.opencontainers.image.version":     s.Info.Version,
		"org.opencontainers.image.revision":    rev,
		"org.opencontainers.image.created":     s.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":      s.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// layer gzips a layer's tar once, here, at the default level: the same
// bytes on every build with one Go toolchain, so the same digest, and
// compressed once (the library would compress again for the digest and
// again for the archive, which costs seconds for the binary's layer).
func layer(entries []entry, mtime time.Time) (v1.Layer, error) {
	b, err := layerTar(entries, mtime)
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(gz.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return l, nil
}

// tagVersion turns a module version into a valid image tag (no '+').
func tagVersion(v string) string {
	v = strings.NewReplacer("+", "-", "(", "", ")", "").Replace(v)
	if v == "" {
		return "devel"
	}
	return v
}
