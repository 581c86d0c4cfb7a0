package secretfile_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jobgate/jobgate/internal/secretfile"
	"github.com/stretchr/testify/require"
)

func TestConcurrentCreatorsAgree(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "x.secret")
	const n = 16
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = secretfile.ReadOrCreate(path) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, got[0], got[i])
	}
	require.Len(t, got[0], 64)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	left, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, left, 1, "no temporary file is left behind")
	again, err := secretfile.Read(path)
	require.NoError(t, err)
	require.Equal(t, got[0], again)
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := secretfile.Read(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	_, err = secretfile.ReadOrCreate(empty)
	require.ErrorIs(t, err, secretfile.ErrEmpty, "an empty file is not replaced behind the operator's back")
}
