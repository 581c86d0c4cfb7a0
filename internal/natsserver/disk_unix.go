//go:build linux || darwin || freebsd || netbsd || openbsd

package natsserver

import "syscall"

func statfsFree(dir string) (int64, bool, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false, err
	}
	return int64(st.Bavail) * int64(st.Bsize), true, nil
}
