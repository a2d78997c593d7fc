package cli

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

const pointAtClusterHint = "point lifeboat at a cluster with --kubeconfig or the KUBECONFIG environment variable, " +
	"or start a local one with `make cluster` (it writes .lifeboat/kubeconfig)"

// errCRDsMissing is returned whenever the API server does not serve the
// velero.io kinds; the fix is always the same.
var errCRDsMissing = errors.New("the velero.io CRDs are not installed in this cluster; run `lifeboat install`")

// explain turns the two failures that make every command fail the same way
// (no API server, no CRDs) into messages that say what to do. Other errors
// pass through unchanged.
func (f *Factory) explain(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, errCRDsMissing) {
		return err
	}
	if isCRDMissing(err) {
		return &crdsMissingError{server: f.serverURL(), cause: err}
	}
	if isUnreachable(err) {
		server := f.serverURL()
		if server == "" {
			server = "(unknown address)"
		}
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %w\n%s", server, err, pointAtClusterHint)
	}
	return err
}

// crdsMissingError keeps the client's error reachable through errors.Is/As
// (meta.IsNoMatchError still works) while its message only says what to do:
// the raw discovery error is noise to someone who has not installed yet.
type crdsMissingError struct {
	server string
	cause  error
}

func (e *crdsMissingError) Error() string {
	if e.server == "" {
		return errCRDsMissing.Error()
	}
	return fmt.Sprintf("%v (API server %s)", errCRDsMissing, e.server)
}

func (e *crdsMissingError) Unwrap() []error { return []error{errCRDsMissing, e.cause} }

// isCRDMissing reports whether err says the API server does not know the
// resource at all, as opposed to one object of it being absent.
func isCRDMissing(err error) bool {
	if meta.IsNoMatchError(err) {
		return true
	}
	// A CRD deleted after discovery answered shows up as a bare 404 for the
	// whole resource path, which the API server words like this.
	return apierrors.IsNotFound(err) && strings.Contains(err.Error(), "the server could not find the requested resource")
}

// isUnreachable reports whether err happened before any HTTP response came
// back: client-go returns HTTP failures as StatusErrors, so a url.Error or a
// network error means the server was never reached.
func isUnreachable(err error) bool {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr)
}

// notFoundError names the object and the namespace searched, since a wrong
// -n is the usual cause. It is a type so callers can add a hint that fits
// their verb.
type notFoundError struct {
	kind, name, namespace string
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("%s %q not found in namespace %q", e.kind, e.name, e.namespace)
}
