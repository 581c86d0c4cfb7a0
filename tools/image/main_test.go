package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// moduleRoot is jobgate's repository, whose cmd/jobgate the tests build.
const moduleRoot = "../.."

// testBinary is the static binary the tests build once (TestMain);
// testImage is the image TestMain builds of it, which the tests read, and
// testDigest its digest. Built once: compressing the binary's layer takes
// seconds under the race detector.
var testBinary, testImage, testDigest string

// testEpoch is the SOURCE_DATE_EPOCH of the tests' images.
const testEpoch = "1764800000"

// testSource is the tests' source label.
const testSource = "https://example.com/jobgate"

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "jobgate-image-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		testBinary = filepath.Join(dir, "jobgate")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		if err := buildBinary(ctx, moduleRoot, testBinary); err != nil {
			fmt.Fprintln(os.Stderr, "building jobgate:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "built the static jobgate in %s\n", time.Since(start).Round(time.Millisecond))
		start = time.Now()
		testImage = filepath.Join(dir, "jobgate-image.tar")
		testDigest, _, err = write(ctx, options{root: moduleRoot, out: testImage, binary: testBinary, source: testSource}, testEpoch)
		if err != nil {
			fmt.Fprintln(os.Stderr, "building the image:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "built the image in %s\n", time.Since(start).Round(time.Millisecond))
		return m.Run()
	}())
}

// untar unpacks a tar stream into dir as a container runtime would:
// modes, owners (the tests run as root: CI and this machine do) and
// times kept; a path that would leave dir is an error.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("untar: %w", err)
		}
		p := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("untar: %q leaves the root", h.Name)
		}
		mode := os.FileMode(h.Mode).Perm()
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("untar: %w", err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return fmt.Errorf("untar: %w", err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("untar %s: %w", h.Name, err)
			}
		default:
			return fmt.Errorf("untar: %s: unexpected type %c", h.Name, h.Typeflag)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				return fmt.Errorf("untar: %w", err)
			}
		}
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("untar: %w", err)
		}
	}
}

// fmtAny compares values by their printed form (maps print sorted).
func fmtAny(v any) string { return fmt.Sprintf("%#v", v) }

// ownerOf is a file's uid:gid.
func ownerOf(t *testing.T, fi os.FileInfo) string {
	t.Helper()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("%s: no owner", fi.Name())
	}
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}
