package main

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// readLayout unpacks an archive and reads it as an OCI image layout: the
// image its index names, and the digest the index gives it.
func readLayout(t *testing.T, archive string) (v1.Image, v1.Hash) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := untar(f, dir); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("not an OCI image layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) == 0 {
		t.Fatal("the index names no image")
	}
	d := im.Manifests[0].Digest
	img, err := idx.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	return img, d
}

// Two builds of one commit are the same bytes, so the same digest; the
// archive is an OCI layout and a docker-archive of one image.
func TestTwoBuildsHaveOneDigest(t *testing.T) {
	dir := t.TempDir()
	again := filepath.Join(dir, "again.tar")
	d, _, err := write(context.Background(), options{root: moduleRoot, out: again, binary: testBinary, source: testSource}, testEpoch)
	if err != nil {
		t.Fatal(err)
	}
	var sums [2][32]byte
	for i, p := range []string{testImage, again} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = sha256.Sum256(b)
	}
	if d != testDigest || sums[0] != sums[1] {
		t.Fatalf("two builds differ: %s and %s (archives %x, %x)", testDigest, d, sums[0], sums[1])
	}

	img, got := readLayout(t, again)
	if got.String() != d {
		t.Fatalf("index.json names %s, the build said %s", got, d)
	}
	if d2, err := img.Digest(); err != nil || d2.String() != d {
		t.Fatalf("the layout's image has digest %s (%v), want %s", d2, err, d)
	}
	// docker load reads manifest.json: the same config and layers.
	dimg, err := tarball.ImageFromPath(again, nil)
	if err != nil {
		t.Fatalf("not a docker-archive: %v", err)
	}
	dc, err := dimg.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := img.ConfigName(); c != dc {
		t.Fatalf("manifest.json names config %s, the OCI manifest %s", dc, c)
	}
	// deploy/compose and deploy/helm run jobgate:dev unless told otherwise.
	if _, err := tarball.ImageFromPath(again, mustTag(t, "jobgate:dev")); err != nil {
		t.Fatalf("no jobgate:dev in the archive: %v", err)
	}
	dl, err := dimg.Layers()
	if err != nil {
		t.Fatal(err)
	}
	ol, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(dl) != len(ol) {
		t.Fatalf("manifest.json names %d layers, the OCI manifest %d", len(dl), len(ol))
	}
	for i := range dl {
		a, _ := dl[i].DiffID()
		b, _ := ol[i].DiffID()
		if a != b {
			t.Fatalf("layer %d: manifest.json's %s, the OCI manifest's %s", i, a, b)
		}
	}
}

// The config says how to run it: entrypoint, default command, the
// non-root user, the settings that make it listen on every interface and
// keep its data in the volume, the labels; the root file system holds
// the user, a CA bundle and the volume owned by the user.
func TestImageConfigAndFiles(t *testing.T) {
	img, _ := readLayout(t, testImage)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	eq := func(what string, got, want any) {
		t.Helper()
		if fmtAny(got) != fmtAny(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	eq("entrypoint", c.Entrypoint, []string{"/usr/local/bin/jobgate"})
	eq("cmd", c.Cmd, []string{"serve"})
	eq("user", c.User, "65532:65532")
	eq("workdir", c.WorkingDir, "/var/lib/jobgate")
	eq("volumes", c.Volumes, map[string]struct{}{"/var/lib/jobgate": {}})
	eq("env", c.Env, []string{"PATH=/usr/local/bin", "JOBGATE_HTTP_ADDR=0.0.0.0:8080", "JOBGATE_DATA_DIR=/var/lib/jobgate", "JOBGATE_LOG_FORMAT=json"})
	eq("created", cf.Created.Unix(), int64(1764800000))
	for k, want := range map[string]string{
		"org.opencontainers.image.source":   testSource,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  "2025-12-03T22:13:20Z",
	} {
		eq("label "+k, c.Labels[k], want)
	}
	if c.Healthcheck == nil || fmtAny(c.Healthcheck.Test) != fmtAny([]string{"CMD", "jobgate", "health", "--url", "http://127.0.0.1:8080/readyz"}) {
		t.Errorf("health check %+v, want jobgate health on the gateway's /readyz", c.Healthcheck)
	}
	if c.Labels["org.opencontainers.image.version"] == "" {
		t.Error("no version label")
	}

	// Every file is dated SOURCE_DATE_EPOCH, nothing of the build time.
	rc := mutate.Extract(img)
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.ModTime.Unix() != 1764800000 {
			t.Errorf("%s is dated %s, not SOURCE_DATE_EPOCH", h.Name, h.ModTime)
		}
	}
	rc.Close()
	root := t.TempDir()
	rc = mutate.Extract(img)
	defer rc.Close()
	if err := untar(rc, root); err != nil {
		t.Fatal(err)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	eq("passwd", string(passwd), "root:x:0:0:root:/root:/sbin/nologin\njobgate:x:65532:65532:jobgate:/var/lib/jobgate:/sbin/nologin\n")
	pemBytes, err := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("the CA bundle holds no certificate")
	}
	if n := countPEM(pemBytes); n < 100 {
		t.Errorf("the CA bundle holds %d roots, want the NSS store's (over 100)", n)
	}
	st, err := os.Stat(filepath.Join(root, "var/lib/jobgate"))
	if err != nil {
		t.Fatal(err)
	}
	eq("data dir mode", st.Mode().String(), "drwx------")
	if os.Geteuid() == 0 {
		eq("data dir owner", ownerOf(t, st), "65532:65532")
	}
	st, err = os.Stat(filepath.Join(root, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	eq("tmp mode", st.Mode().String(), "dtrwxrwxrwx")
	if _, err := os.Stat(filepath.Join(root, "usr/share/doc/jobgate/LICENSE")); err != nil {
		t.Error(err)
	}
}

func countPEM(b []byte) int {
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return n
		}
		n++
	}
}

func mustTag(t *testing.T, s string) *name.Tag {
	t.Helper()
	tag, err := name.NewTag(s)
	if err != nil {
		t.Fatal(err)
	}
	return &tag
}
