package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// writeArchive writes img as one tarball that is both an OCI image layout
// (oci-layout, index.json, blobs/sha256/...: skopeo, podman, containerd,
// crane) and a docker-archive (manifest.json naming the same blobs:
// docker load), the shape `docker save` writes since Docker 25. Unlike a
// docker-archive alone it keeps the manifest, so the image's digest is
// in it (index.json). Entries are sorted and dated mtime: the same image
// gives the same bytes.
func writeArchive(w io.Writer, img v1.Image, tags []name.Tag, mtime time.Time) error {
	files := map[string][]byte{}
	blob := func(d v1.Hash) string { return "blobs/" + d.Algorithm + "/" + d.Hex }
	manifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	files[blob(digest)] = manifest
	config, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	configName, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	files[blob(configName)] = config
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("layers: %w", err)
	}
	var layerNames []string
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("layer: %w", err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("layer %s: %w", d, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %s: %w", d, err)
		}
		files[blob(d)] = b
		layerNames = append(layerNames, blob(d))
	}
	mt, err := img.MediaType()
	if err != nil {
		return fmt.Errorf("media type: %w", err)
	}
	var descs []v1.Descriptor
	var repoTags []string
	for _, t := range tags {
		repoTags = append(repoTags, t.String())
		descs = append(descs, v1.Descriptor{MediaType: mt, Digest: digest, Size: int64(len(manifest)),
			Annotations: map[string]string{
				// containerd and docker read the full name, other
				// OCI tools the tag.
				"io.containerd.image.name":          "docker.io/" + t.RepositoryStr() + ":" + t.TagStr(),
				"org.opencontainers.image.ref.name": t.TagStr(),
			}})
	}
	index, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: descs})
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	files["index.json"] = index
	files["oci-layout"] = []byte(`{"imageLayoutVersion":"1.0.0"}`)
	dockerManifest, err := json.Marshal([]map[string]any{{
		"Config": blob(configName), "RepoTags": repoTags, "Layers": layerNames,
	}})
	if err != nil {
		return fmt.Errorf("manifest.json: %w", err)
	}
	files["manifest.json"] = dockerManifest

	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return fmt.Errorf("archive: %w", err)
		}
	}
	for _, n := range names {
		b := files[n]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(b)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return fmt.Errorf("archive %s: %w", n, err)
		}
		if _, err := tw.Write(b); err != nil {
			return fmt.Errorf("archive %s: %w", n, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return nil
}

// writeArchiveFile writes the archive to path by way of a temporary file
// renamed into place, so an interrupted build never leaves half a tarball
// under the name.
func writeArchiveFile(path string, img v1.Image, tags []name.Tag, mtime time.Time) error {
	tmp := path + ".new"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := writeArchive(f, img, tags, mtime); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
