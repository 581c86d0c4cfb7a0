package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// buildFlags make the binary static and the same bytes on every build of
// one commit: no cgo (the image has no libc), no local paths, no build id
// (which would hash the linker's inputs' paths), Go's own time zone data
// (the image has no /usr/share/zoneinfo). -buildvcs=auto overrides a
// GOFLAGS=-buildvcs=false (this machine's go env has it): the commit and
// its time in the build info are the image's version, revision and date.
var buildFlags = []string{"build", "-trimpath", "-buildvcs=auto", "-tags", "timetzdata", "-ldflags", "-s -w -buildid="}

// buildBinary compiles module root's cmd/jobgate into out.
func buildBinary(ctx context.Context, root, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("binary path: %w", err)
	}
	args := append(append([]string{}, buildFlags...), "-o", abs, "./cmd/jobgate")
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// goTool is the go command of the toolchain running this program, so the
// binary is built by the same Go as the builder (GOTOOLCHAIN aside).
func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// binaryInfo is what the image's labels say about the binary: its module
// version and the commit it was built from, read from its build info.
type binaryInfo struct {
	Version  string // v0.0.0-20261204202908-66884e9abcde, or (devel)
	Revision string // the commit, empty outside a git checkout
	Time     string // the commit's time (RFC 3339), empty outside git
	Modified bool   // built from a work tree with uncommitted changes
}

func readBinaryInfo(path string) (binaryInfo, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return binaryInfo{}, fmt.Errorf("build info of %s: %w", path, err)
	}
	info := binaryInfo{Version: bi.Main.Version}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info, nil
}
