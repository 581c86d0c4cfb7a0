package job

import "mime"

// FileExtension is the file name extension (with its dot) of a result of
// the given content type: ".pdf" for application/pdf, ".csv" for text/csv,
// the system's media type tables for the rest, ".bin" when nothing fits. A
// result is named after its job and this: the gateway's Content-Disposition
// and the CLI's default file name (jobgate fetch, submit --wait) alike.
func FileExtension(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ".bin"
	}
	switch mt {
	case "application/pdf":
		return ".pdf"
	case "text/csv":
		return ".csv"
	case "text/tab-separated-values":
		return ".tsv"
	case "text/plain":
		return ".txt"
	case "application/json":
		return ".json"
	case "application/zip":
		return ".zip"
	}
	if exts, err := mime.ExtensionsByType(mt); err == nil && len(exts) > 0 && plainExtension(exts[0]) {
		return exts[0]
	}
	return ".bin"
}

// plainExtension reports whether ext (from the system's media type tables)
// is a dot and 1 to 16 letters, digits, '-', '_' or '+': it goes into a
// quoted file name, where nothing else belongs.
func plainExtension(ext string) bool {
	if len(ext) < 2 || len(ext) > 17 || ext[0] != '.' {
		return false
	}
	for i := 1; i < len(ext); i++ {
		c := ext[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '+') {
			return false
		}
	}
	return true
}
