// Package s3server runs a real S3 server (versitygw over a temporary
// directory) for tests. The binary comes from hack/versitygw.sh, which builds
// it once per machine into a cache.
package s3server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:41234.
	Endpoint  string
	AccessKey string
	SecretKey string
	// Dir is the directory the server keeps its buckets in; bucket b is
	// Dir/b.
	Dir string

	client  *s3.Client
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	tmp     string
	stop    sync.Once
	buckets atomic.Int64
}

// Start runs a server for the test and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	srv, err := Launch()
	if err != nil {
		t.Fatalf("start S3 server: %v", err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// Launch runs a server that lives until Close, for TestMain, where one
// server serves every test of a package.
func Launch() (*Server, error) {
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
	}
	if err := os.Mkdir(s.Dir, 0o700); err != nil {
		os.RemoveAll(tmp)
		return nil, err
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
	})
	return s, nil
}

func (s *Server) run(bin string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s.Endpoint = "http://" + addr
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()

	cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", s.Dir)
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
	client := &http.Client{Timeout: time.Second}
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
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
