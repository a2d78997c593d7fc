package s3blob

import (
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/kopia/kopia/repo/blob"

	"github.com/lifeboat-io/lifeboat/internal/testutil/s3server"
)

// BenchmarkUpload measures what putting 512 MiB in 16 MiB blobs (kopia's
// pack size range is 8-20 MiB), two at a time as kopia's uploads run,
// costs in CPU: this process (the uploader) and versitygw, through kopia's
// own s3 storage and through this one with the payload-hash and checksum
// choices the SDK offers (its defaults first: SHA-256 over HTTP,
// UNSIGNED-PAYLOAD over TLS, CRC32). Run it alone, once per variant:
//
//	go test -run '^$' -bench Upload -benchtime 1x ./internal/podvolume/repository/s3blob/
func BenchmarkUpload(b *testing.B) {
	needServer(b)
	tlsServer := s3server.Start(b, s3server.WithTLS())
	noCRC := func(o *s3.Options) {
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	}
	unsigned := func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	}
	ours := func(optFns ...func(*s3.Options)) func(testing.TB, *Options) blob.Storage {
		return func(t testing.TB, opt *Options) blob.Storage {
			st, err := newStorage(t.Context(), opt, optFns...)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
	}
	for _, v := range []struct {
		name   string
		server *s3server.Server
		open   func(testing.TB, *Options) blob.Storage
	}{
		{"http/kopia-minio", srv, kopiaS3},
		{"http/lifeboat-sha256+crc32", srv, ours()},
		{"http/lifeboat-sha256", srv, ours(noCRC)},
		{"http/lifeboat-unsigned+crc32", srv, ours(unsigned)},
		{"http/lifeboat-unsigned", srv, ours(unsigned, noCRC)},
		{"tls/kopia-minio", tlsServer, kopiaS3},
		{"tls/lifeboat-unsigned+crc32", tlsServer, ours()},
		{"tls/lifeboat-unsigned", tlsServer, ours(noCRC)},
	} {
		b.Run(v.name, func(b *testing.B) {
			opt := options(b, v.server)
			st := v.open(b, opt)
			upload(b, st, v.server.Pid())
		})
	}
}

const (
	benchTotal   = 512 << 20
	benchBlob    = 16 << 20
	benchWorkers = 2
)

func upload(b *testing.B, st blob.Storage, serverPid int) {
	ctx := b.Context()
	data := make([]byte, benchBlob)
	rand.Read(data)
	var clientCPU, serverCPU, wall time.Duration
	for i := 0; i < b.N; i++ {
		ids := make(chan blob.ID)
		go func() {
			defer close(ids)
			for n := range benchTotal / benchBlob {
				ids <- blob.ID(fmt.Sprintf("p%08d-%d", n, i))
			}
		}()
		c0, s0, t0 := selfCPU(b), procCPU(b, serverPid), time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, benchWorkers)
		for range benchWorkers {
			wg.Go(func() {
				for id := range ids {
					if err := st.PutBlob(ctx, id, sliceBytes(data), blob.PutOptions{}); err != nil {
						errs <- err
						for range ids {
						}
						return
					}
				}
			})
		}
		wg.Wait()
		wall += time.Since(t0)
		clientCPU += selfCPU(b) - c0
		serverCPU += procCPU(b, serverPid) - s0
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		all, err := blob.ListAllBlobs(ctx, st, "")
		if err != nil || len(all) != benchTotal/benchBlob {
			b.Fatalf("listing the uploaded blobs: %d, %v", len(all), err)
		}
		if err := blob.DeleteMultiple(ctx, st, blob.IDsFromMetadata(all), 4); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(b.N)
	b.SetBytes(benchTotal)
	b.ReportMetric(clientCPU.Seconds()/n, "client-cpu-s")
	b.ReportMetric(serverCPU.Seconds()/n, "server-cpu-s")
	b.ReportMetric(float64(benchTotal)/(1<<20)/(wall.Seconds()/n), "MiB/s")
}

func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user+system time of a process from /proc/<pid>/stat, in
// clock ticks of 1/100 s (USER_HZ on Linux).
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces; fields count from
	// after it: utime and stime are the 14th and 15th of the line.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parsing /proc/%d/stat: %q", pid, raw)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
