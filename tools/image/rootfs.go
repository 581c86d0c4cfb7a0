package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The user the image runs as: 65532, the "nonroot" of distroless images,
// so volumes prepared for those fit this one too.
const (
	uid      = 65532
	gid      = 65532
	userName = "jobgate"
	dataDir  = "/var/lib/jobgate"
	binPath  = "/usr/local/bin/jobgate"
)

// entry is one file or directory of a layer.
type entry struct {
	name     string // absolute path in the image
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// baseEntries is the root file system under the binary: just what a Go
// program serving HTTP and speaking TLS needs from the OS.
func baseEntries() []entry {
	root := func(name string, mode int64, data string) entry {
		return entry{name: name, mode: mode, data: []byte(data)}
	}
	dir := func(name string, mode int64) entry { return entry{name: name, mode: mode, dir: true} }
	return []entry{
		// A named user, so tools that look the uid up (ps, id, the Go
		// os/user package) find it; no shell, no password.
		root("/etc/passwd", 0o644, "root:x:0:0:root:/root:/sbin/nologin\n"+
			fmt.Sprintf("%s:x:%d:%d:jobgate:%s:/sbin/nologin\n", userName, uid, gid, dataDir)),
		root("/etc/group", 0o644, fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, gid)),
		// Go's resolver reads it to order /etc/hosts before DNS.
		root("/etc/nsswitch.conf", 0o644, "hosts: files dns\n"),
		// Webhooks, endpoint types, SMTP and NATS over TLS verify public
		// certificates against these roots.
		{name: "/etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: caBundle()},
		dir("/tmp", 0o1777),
		// The data volume: the embedded NATS store and the secrets, the
		// user's alone.
		{name: dataDir, mode: 0o700, uid: uid, gid: gid, dir: true},
	}
}

// caBundle is the Mozilla NSS root store as one PEM file, from Go's own
// copy (golang.org/x/crypto/x509roots/fallback, pinned in go.mod), so the
// image does not depend on the building machine's certificates. Roots NSS
// distrusts after a date carry a constraint PEM cannot state: left out.
func caBundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}

// appEntries is the layer of the binary and its licence.
func appEntries(binary, licence string) ([]entry, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("binary: %w", err)
	}
	lic, err := os.ReadFile(licence)
	if err != nil {
		return nil, fmt.Errorf("licence: %w", err)
	}
	return []entry{
		{name: binPath, mode: 0o755, data: bin},
		{name: "/usr/share/doc/jobgate/LICENSE", mode: 0o644, data: lic},
	}, nil
}

// layerTar writes entries as an uncompressed layer: parents before
// children, sorted, each time mtime, root-owned unless said otherwise,
// so the bytes depend on the contents alone.
func layerTar(entries []entry, mtime time.Time) ([]byte, error) {
	all := map[string]entry{}
	for _, e := range entries {
		all[e.name] = e
		for p := path.Dir(e.name); p != "/"; p = path.Dir(p) {
			if _, ok := all[p]; !ok {
				all[p] = entry{name: p, mode: 0o755, dir: true}
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := all[n]
		h := &tar.Header{
			Name:    strings.TrimPrefix(n, "/"),
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if e.uid == uid {
			h.Uname, h.Gname = userName, userName
		} else {
			h.Uname, h.Gname = "root", "root"
		}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer %s: %w", n, err)
		}
		if _, err := io.Copy(tw, bytes.NewReader(e.data)); err != nil {
			return nil, fmt.Errorf("layer %s: %w", n, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}
