package s3server

import (
	"bufio"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStartServesBuckets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts versitygw")
	}
	srv := Start(t)
	name := srv.NewBucket(t)
	if fi, err := os.Stat(filepath.Join(srv.Dir, name)); err != nil || !fi.IsDir() {
		t.Errorf("bucket %s has no directory under %s: %v", name, srv.Dir, err)
	}
	if !strings.Contains(string(srv.CredentialsFile()), "aws_secret_access_key = "+srv.SecretKey) {
		t.Errorf("CredentialsFile() = %q", srv.CredentialsFile())
	}
	srv.Close()
	if answers(srv.Endpoint) {
		t.Errorf("server still answers after Close")
	}
	if _, err := os.Stat(srv.Dir); !os.IsNotExist(err) {
		t.Errorf("data directory %s left after Close: %v", srv.Dir, err)
	}
}

const helperEnv = "LIFEBOAT_S3SERVER_HELPER"

// TestServerDiesWithTestProcess SIGKILLs a test process that runs a server
// and checks that the server goes too, so a killed or timed-out go test
// leaves no gateway behind.
func TestServerDiesWithTestProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		srv, err := Launch()
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Println("READY", srv.Endpoint)
		select {} // until killed
	}
	if testing.Short() {
		t.Skip("starts versitygw")
	}
	if _, err := binary(); err != nil { // build before the child's clock runs
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTestProcess$")
	// The killed helper cannot remove its data directory; this one can.
	child.Env = append(os.Environ(), helperEnv+"=1", "TMPDIR="+t.TempDir())
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper said %q: %v", line, err)
	}
	endpoint, ok := strings.CutPrefix(strings.TrimSpace(line), "READY ")
	if !ok {
		t.Fatalf("helper said %q", line)
	}
	if !answers(endpoint) {
		t.Fatalf("server at %s does not answer while its test process lives", endpoint)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait() // killed: its status is the signal
	deadline := time.Now().Add(10 * time.Second)
	for answers(endpoint) {
		if time.Now().After(deadline) {
			t.Fatalf("server at %s still answers 10s after its test process was killed", endpoint)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func answers(endpoint string) bool {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get(endpoint)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// TestWithTLSServesOnlyClientsTrustingItsCA: with WithTLS the server
// speaks HTTPS, a client given Server.CACert works, and one without it is
// refused for an unknown authority (so a caller that ignores the CA fails).
func TestWithTLSServesOnlyClientsTrustingItsCA(t *testing.T) {
	if testing.Short() {
		t.Skip("starts versitygw")
	}
	srv := Start(t, WithTLS())
	if !strings.HasPrefix(srv.Endpoint, "https://127.0.0.1:") {
		t.Fatalf("Endpoint = %q, want https://127.0.0.1:<port>", srv.Endpoint)
	}
	if !strings.Contains(string(srv.CACert), "BEGIN CERTIFICATE") {
		t.Fatalf("CACert = %q, want a PEM certificate", srv.CACert)
	}
	srv.NewBucket(t) // through the client that trusts the CA
	resp, err := srv.HTTPClient().Get(srv.Endpoint)
	if err != nil {
		t.Fatalf("GET with the CA: %v", err)
	}
	resp.Body.Close()
	resp, err = (&http.Client{Timeout: 5 * time.Second}).Get(srv.Endpoint)
	if err == nil {
		resp.Body.Close()
	}
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("GET without the CA: err = %v, want an unknown-authority error", err)
	}
}

// TestWithHostListensOnlyThere: with WithHost the server listens on that
// address alone (what a real node's pods reach the host at), and with
// WithTLS its certificate is for that address: a client trusting the CA
// creates a bucket there, and the same port on 127.0.0.1 answers nothing.
func TestWithHostListensOnlyThere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts versitygw")
	}
	host := nonLoopbackIPv4(t)
	srv := Start(t, WithHost(host), WithTLS())
	u, err := url.Parse(srv.Endpoint)
	if err != nil || u.Scheme != "https" || u.Hostname() != host {
		t.Fatalf("Endpoint = %q, want https://%s:<port>", srv.Endpoint, host)
	}
	srv.NewBucket(t) // verifies the certificate against host
	if answers("http://127.0.0.1:" + u.Port()) {
		t.Errorf("127.0.0.1:%s answers; the server should listen on %s only", u.Port(), host)
	}
}

// nonLoopbackIPv4 is an IPv4 address of this machine other than loopback.
func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && ipn.IP.IsGlobalUnicast() {
			return ipn.IP.String()
		}
	}
	t.Fatalf("this machine has no non-loopback IPv4 address among %v", addrs)
	return ""
}
