package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPluginRatioIsPerPairThenMedian(t *testing.T) {
	pair := func(without, with float64, withPeakKiB int64) pluginRunResult {
		return pluginRunResult{
			Without: pluginModeResult{Backup: lifeboatResult{WallSeconds: without, PeakRSSKiBSoFar: 1024}},
			With:    pluginModeResult{Plugin: true, Backup: lifeboatResult{WallSeconds: with, PeakRSSKiBSoFar: withPeakKiB}},
		}
	}
	s := pluginSizeResult{N: 100, Runs: []pluginRunResult{
		pair(1, 1, 2048),   // 1.0
		pair(2, 2.4, 4096), // 1.2
		pair(1, 2, 3072),   // 2.0
	}}
	wo, wi, r, peak, woPeak := s.medians()
	if wo != 1 || wi != 2 || r != 1.2 || peak != 4096 || woPeak != 1024 {
		t.Errorf("medians = without %v, with %v, ratio %v, peak %d, without peak %d; want 1, 2, 1.2, 4096, 1024", wo, wi, r, peak, woPeak)
	}
}

func TestPluginReportHasOneRowPerN(t *testing.T) {
	var buf bytes.Buffer
	writePluginReport(&buf, config{runs: 1, namespaces: 20, warmup: 1, pluginBin: "/tmp/x/annotate"}, []pluginSizeResult{
		{N: 10000, Runs: []pluginRunResult{{Run: 1,
			Without: pluginModeResult{Backup: lifeboatResult{Items: 10020, WallSeconds: 1}},
			With:    pluginModeResult{Plugin: true, Annotated: 10000, Backup: lifeboatResult{Items: 10020, WallSeconds: 1.25, PeakRSSKiBSoFar: 81920}}}}},
	})
	out := buf.String()
	if !strings.Contains(out, "| 10000 | 1.000 | 1.250 | 1.25 | 80.0 |") {
		t.Errorf("summary row missing or wrong:\n%s", out)
	}
	if !strings.Contains(out, "| 10000 | 1 | with | 10020 | 10000 | 1.250 |") {
		t.Errorf("raw row of the backup with the plugin missing or wrong:\n%s", out)
	}
}

func TestCountAnnotated(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{
		"resources/configmaps/namespaces/a/one.json":                     `{"metadata":{"annotations":{"example.lifeboat.io/backed-up-by":"b"}}}`,
		"resources/configmaps/namespaces/a/two.json":                     `{"metadata":{"name":"two"}}`,
		"resources/configmaps/v1-preferredversion/namespaces/a/one.json": `{"metadata":{"annotations":{"example.lifeboat.io/backed-up-by":"b"}}}`,
		"resources/namespaces/cluster/a.json":                            `{"metadata":{"annotations":{"example.lifeboat.io/backed-up-by":"b"}}}`,
		"resources/configmaps/v1-preferredversion/namespaces/a/two.json": `{"metadata":{"name":"two"}}`,
		"metadata/version": "1.1.0",
	} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.tar.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cms, annotated, err := countAnnotated(path, pluginAnnotation)
	if err != nil {
		t.Fatal(err)
	}
	if cms != 2 || annotated != 1 {
		t.Errorf("countAnnotated = %d ConfigMaps, %d annotated; want 2 and 1 (the unversioned copies only)", cms, annotated)
	}
}
