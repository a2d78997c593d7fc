package storage

// SetMaxGzipJSONBytes lowers the bound on gzipped JSON files for a test
// and returns the function that puts it back.
func SetMaxGzipJSONBytes(n int64) (restore func()) {
	old := maxGzipJSONBytes
	maxGzipJSONBytes = n
	return func() { maxGzipJSONBytes = old }
}
