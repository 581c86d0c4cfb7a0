package job

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFileExtension(t *testing.T) {
	t.Parallel()
	for ct, ext := range map[string]string{
		"application/pdf":           ".pdf",
		"text/csv":                  ".csv",
		"text/csv; charset=utf-8":   ".csv",
		"TEXT/CSV":                  ".csv",
		"text/plain; charset=utf-8": ".txt",
		"application/json":          ".json",
		"text/tab-separated-values": ".tsv",
		"application/zip":           ".zip",
		"image/png":                 ".png", // Go's own table
		"application/x-jobgate-odd": ".bin",
		"":                          ".bin",
		"not a media type":          ".bin",
	} {
		require.Equal(t, ext, FileExtension(ct), "%q", ct)
	}
}
