// Package s3server runs a real S3 server (versitygw over a temporary
// directory) for tests, over plain HTTP or, with WithTLS, over HTTPS with a
// CA of its own. The binary comes from hack/versitygw.sh, which builds it
// once per machine into a cache.
package s3server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// BinaryEnv, when set, names a versitygw binary to use instead of building
// one with hack/versitygw.sh.
const BinaryEnv = "LIFEBOAT_VERSITYGW"

// Region is the region the server answers for.
const Region = "us-east-1"

// Server is a running versitygw.
type Server struct {
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:41234
	// (https:// with WithTLS).
	Endpoint  string
	AccessKey string
	SecretKey string
	// Dir is the directory the server keeps its buckets in; bucket b is
	// Dir/b.
	Dir string
	// CACert is, with WithTLS, the PEM certificate of the CA that signed
	// the server's certificate: what a client must trust. Empty without TLS.
	CACert []byte

	tls     bool
	host    string // the address it listens on; 127.0.0.1 unless WithHost
	client  *s3.Client
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	tmp     string
	stop    sync.Once
	buckets atomic.Int64
}

// Option changes how a server is run.
type Option func(*Server)

// WithTLS serves HTTPS with a certificate for its address signed by a CA made
// for this server alone (Server.CACert), so that only a client given that
// CA can talk to it: a test of a location's CA settings fails if they are
// ignored.
func WithTLS() Option {
	return func(s *Server) { s.tls = true }
}

// WithHost listens on host (an IP address of this machine) instead of
// 127.0.0.1: pods of a real node reach the host at the node's IP, never at
// its loopback address, so a server that the node's pods and the host's
// processes share must listen there. With WithTLS the certificate is for
// host as well.
func WithHost(host string) Option {
	return func(s *Server) { s.host = host }
}

// Start runs a server for the test and stops it when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	srv, err := Launch(opts...)
	if err != nil {
		t.Fatalf("start S3 server: %v", err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// Launch runs a server that lives until Close, for TestMain, where one
// server serves every test of a package.
func Launch(opts ...Option) (*Server, error) {
	bin, err := binary()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "lifeboat-s3server-")
	if err != nil {
		return nil, err
	}
	s := &Server{
		AccessKey: "lifeboat-test",
		SecretKey: "lifeboat-test-secret",
		Dir:       filepath.Join(tmp, "data"),
		logPath:   filepath.Join(tmp, "versitygw.log"),
		tmp:       tmp,
		host:      "127.0.0.1",
	}
	for _, o := range opts {
		o(s)
	}
	if err := os.Mkdir(s.Dir, 0o700); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if s.tls {
		if s.CACert, err = writeServerCert(tmp, s.host); err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("making the S3 server's TLS certificate: %w", err)
		}
	}
	// The free port is found by binding and releasing it, so another process
	// may take it first; a second try on a new port covers that race.
	for attempt := 1; ; attempt++ {
		err = s.run(bin)
		if err == nil {
			break
		}
		s.kill()
		if attempt == 2 {
			os.RemoveAll(tmp)
			return nil, err
		}
	}
	s.client = s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		HTTPClient:   s.HTTPClient(),
	})
	return s, nil
}

// HTTPClient returns an HTTP client that trusts the server (its CA, with
// TLS), for tests that fetch its URLs themselves.
func (s *Server) HTTPClient() *http.Client {
	if !s.tls {
		return &http.Client{Timeout: 30 * time.Second}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CACert)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}
}

// writeServerCert makes a CA and a certificate for host signed by it,
// writes the certificate and its key to dir/tls.crt and dir/tls.key for
// versitygw, and returns the CA's certificate (PEM).
func writeServerCert(dir, host string) ([]byte, error) {
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("the server's host %q is not an IP address", host)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "lifeboat test S3 CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{ip},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

func (s *Server) run(bin string) error {
	port, err := freePort(s.host)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(s.host, strconv.Itoa(port))
	s.Endpoint = "http://" + addr
	args := []string{"--port", addr, "--quiet"}
	if s.tls {
		s.Endpoint = "https://" + addr
		args = append(args, "--cert", filepath.Join(s.tmp, "tls.crt"), "--key", filepath.Join(s.tmp, "tls.key"))
	}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()

	cmd := exec.Command(bin, append(args, "posix", s.Dir)...)
	cmd.Env = append(childEnv(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Setpgid lets Stop kill whatever versitygw starts; Pdeathsig kills the
	// server when the test binary dies without running Stop (SIGKILL,
	// panic in TestMain, go test timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	s.cmd = cmd
	s.exited = make(chan struct{})
	started := make(chan error, 1)
	// Pdeathsig fires when the thread that forked the child exits, not the
	// process; the Go runtime may retire an idle thread. Forking from a
	// locked thread that lives until the child is reaped rules that out.
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(s.exited)
			return
		}
		started <- nil
		// Its end is what matters, not its status: it is only ever killed.
		_ = cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	return s.waitReady(30 * time.Second)
}

// waitReady polls until the server answers HTTP at all (an S3 error is an
// answer) or exits.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := s.HTTPClient()
	client.Timeout = time.Second
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("versitygw exited during startup: %s", s.logTail())
		default:
		}
		resp, err := client.Get(s.Endpoint)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("versitygw did not answer on %s within %s: %w; log: %s", s.Endpoint, timeout, err, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pid is the server's process ID, for tests that measure what it costs
// (its CPU time in /proc/<pid>/stat).
func (s *Server) Pid() int {
	return s.cmd.Process.Pid
}

// Close kills the server's process group and removes its data. It is safe
// to call more than once.
func (s *Server) Close() {
	s.stop.Do(func() {
		s.kill()
		os.RemoveAll(s.tmp)
	})
}

func (s *Server) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		// SIGKILL: the data is thrown away, so there is nothing to flush.
		// An error means the group is gone already, which is the aim.
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
}

// PID is the server's process, for benchmarks that read its CPU time.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// CredentialsFile returns an AWS shared-credentials file for the server's
// root user, as a BSL's credential secret would hold it.
func (s *Server) CredentialsFile() []byte {
	return fmt.Appendf(nil, "[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", s.AccessKey, s.SecretKey)
}

// BSLConfig returns the config of a BackupStorageLocation pointing at the
// server.
func (s *Server) BSLConfig() map[string]string {
	return map[string]string{"region": Region, "s3Url": s.Endpoint, "s3ForcePathStyle": "true"}
}

// CreateBucket creates bucket name.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %q: %v", name, err)
	}
}

// NewBucket creates a bucket no other test of the process uses and returns
// its name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("test-%d-%d", os.Getpid(), s.buckets.Add(1))
	s.CreateBucket(t, name)
	return name
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
}

// childEnv drops settings versitygw would read from the environment, so a
// developer's own gateway settings cannot change the tests.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "VGW_") || strings.HasPrefix(kv, "ROOT_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary returns the versitygw binary, building it on first use.
func binary() (string, error) {
	binOnce.Do(func() {
		if p := os.Getenv(BinaryEnv); p != "" {
			binPath = p
			return
		}
		root, err := repoRoot()
		if err != nil {
			binErr = err
			return
		}
		var stdout bytes.Buffer
		cmd := exec.Command("bash", filepath.Join(root, "hack", "versitygw.sh"))
		cmd.Stdout = &stdout
		cmd.Stderr = os.Stderr // a cold build takes minutes; show that it runs
		if err := cmd.Run(); err != nil {
			binErr = fmt.Errorf("hack/versitygw.sh: %w", err)
			return
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		binPath = strings.TrimSpace(lines[len(lines)-1])
		if _, err := os.Stat(binPath); err != nil {
			binErr = fmt.Errorf("hack/versitygw.sh printed %q: %w", binPath, err)
		}
	})
	return binPath, binErr
}

// repoRoot walks up from the working directory (a package directory under
// go test) to the directory holding the project's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			isRoot := sc.Scan() && strings.TrimSpace(sc.Text()) == "module github.com/lifeboat-io/lifeboat"
			f.Close()
			if isRoot {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of module github.com/lifeboat-io/lifeboat above the working directory")
		}
		dir = parent
	}
}

// Keys lists the keys in bucket under prefix.
func (s *Server) Keys(t testing.TB, bucket, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("listing %s/%s: %v", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// RunShared is a test package's TestMain for tests that share one server:
// it starts one (none with -short, where *srv stays nil), runs the tests,
// stops it and exits with their status.
func RunShared(m *testing.M, srv **Server, opts ...Option) {
	flag.Parse()
	if !testing.Short() {
		s, err := Launch(opts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "start S3 server:", err)
			os.Exit(1)
		}
		*srv = s
	}
	code := m.Run()
	if *srv != nil {
		(*srv).Close()
	}
	os.Exit(code)
}
