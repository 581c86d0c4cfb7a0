package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	root   string // jobgate's module root
	out    string // the tarball
	binary string // a prebuilt binary instead of building one
	source string
}

func run(ctx context.Context, args []string) error {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.root, "root", "../..", "jobgate's module root (the repository)")
	fs.StringVar(&o.out, "out", "../../bin/jobgate-image.tar", "the docker-loadable tarball to write")
	fs.StringVar(&o.binary, "binary", "", "a static jobgate binary to use instead of building one (tests)")
	fs.StringVar(&o.source, "source", "https://github.com/jobgate/jobgate", "the org.opencontainers.image.source label")
	if err := fs.Parse(args); err != nil {
		return err
	}
	digest, ref, err := write(ctx, o, os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	fmt.Printf("%s  %s  (%s; docker load -i %s)\n", o.out, digest, ref, o.out)
	return nil
}

// write builds the binary (unless given one) and the image, and writes
// the tarball, tagged jobgate:<version> and jobgate:dev (the tag
// deploy/compose and deploy/helm run by default). It returns the image's
// digest and its versioned name.
func write(ctx context.Context, o options, epoch string) (string, string, error) {
	if o.binary == "" {
		o.binary = filepath.Join(filepath.Dir(o.out), "image", "jobgate")
		if err := os.MkdirAll(filepath.Dir(o.binary), 0o755); err != nil {
			return "", "", fmt.Errorf("binary dir: %w", err)
		}
		if err := buildBinary(ctx, o.root, o.binary); err != nil {
			return "", "", err
		}
	}
	info, err := readBinaryInfo(o.binary)
	if err != nil {
		return "", "", err
	}
	created, err := sourceDate(epoch, info)
	if err != nil {
		return "", "", err
	}
	img, err := buildImage(spec{Binary: o.binary, Licence: filepath.Join(o.root, "LICENSE"), Created: created, Info: info, Source: o.source})
	if err != nil {
		return "", "", err
	}
	tag, err := name.NewTag("jobgate:" + tagVersion(info.Version))
	if err != nil {
		return "", "", fmt.Errorf("tag: %w", err)
	}
	dev, err := name.NewTag("jobgate:dev")
	if err != nil {
		return "", "", fmt.Errorf("tag: %w", err)
	}
	if err := writeArchiveFile(o.out, img, []name.Tag{tag, dev}, created); err != nil {
		return "", "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", "", fmt.Errorf("digest: %w", err)
	}
	return d.String(), tag.String(), nil
}

// sourceDate is every time the image holds: SOURCE_DATE_EPOCH when set,
// else the commit's time from the binary's build info, else the Unix epoch
// (a build outside git is still reproducible, just undated).
func sourceDate(epoch string, info binaryInfo) (time.Time, error) {
	if epoch != "" {
		s, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
		}
		return time.Unix(s, 0).UTC(), nil
	}
	if info.Time != "" {
		t, err := time.Parse(time.RFC3339, info.Time)
		if err != nil {
			return time.Time{}, fmt.Errorf("vcs.time %q: %w", info.Time, err)
		}
		return t.UTC(), nil
	}
	return time.Unix(0, 0).UTC(), nil
}
