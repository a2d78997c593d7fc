package framework

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// failingDIA fails in the way its item's name says.
type failingDIA struct{}

func (failingDIA) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{}, errors.New("no selector today")
}

func (failingDIA) Execute(in *api.DeleteItemActionExecuteInput) error {
	switch in.Item.(*unstructured.Unstructured).GetName() {
	case "with-stack":
		return wrapped()
	case "pkg-errors":
		return pkgErrorsStyle()
	case "panic":
		panic("boom")
	case "nil-map":
		var m map[string]int
		m["x"]++ //nolint:staticcheck // SA5000: the panic is the point
	case "nil-pointer":
		var in *api.DeleteItemActionExecuteInput
		_ = in.Item
	case "sleep":
		time.Sleep(2 * time.Second)
	case "grpc-status":
		return status.Error(codes.Unavailable, "the cloud API is down")
	}
	return nil
}

// stackLine is where stackErr creates its error.
var stackLine int

func stackErr() error {
	_, _, line, _ := runtime.Caller(0)
	stackLine = line + 2
	return Errorf("snapshot %s is still in use", "snap-1")
}

func wrapped() error {
	// The stack recorded at creation wins over a later WithStack.
	return WithStack(errors.Join(stackErr()))
}

// pkgErrorsStyle builds an error the way github.com/pkg/errors does, with a
// StackTrace method returning frames that are program counters.
type frame uintptr
type trace []frame
type tracedError struct {
	msg string
	pcs []uintptr
}

func (e *tracedError) Error() string { return e.msg }
func (e *tracedError) StackTrace() trace {
	out := make(trace, len(e.pcs))
	for i, pc := range e.pcs {
		out[i] = frame(pc)
	}
	return out
}

func pkgErrorsStyle() error {
	pcs := make([]uintptr, 8)
	n := runtime.Callers(1, pcs)
	return &tracedError{msg: "made by pkg/errors", pcs: pcs[:n]}
}

func failingClient(t *testing.T, timeout time.Duration) api.DeleteItemAction {
	t.Helper()
	c := connect(t, NewServer().RegisterDeleteItemAction("example.io/cleanup", instance[api.DeleteItemAction](failingDIA{})))
	return must[api.DeleteItemAction](t)(DeleteItemActionClient(dispense(t, c, api.KindDeleteItemAction), "example.io/cleanup", timeout))
}

func execute(dia api.DeleteItemAction, name string) error {
	return dia.Execute(&api.DeleteItemActionExecuteInput{Item: testItem(name), Backup: testBackup()})
}

func pluginError(t *testing.T, err error) *PluginError {
	t.Helper()
	var pe *PluginError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *PluginError", err, err)
	}
	return pe
}

func TestErrorCarriesStack(t *testing.T) {
	dia := failingClient(t, time.Minute)
	err := execute(dia, "with-stack")
	pe := pluginError(t, err)
	want := "DeleteItemAction example.io/cleanup: Execute: snapshot snap-1 is still in use (at errors_test.go:" + strconv.Itoa(stackLine) + ")"
	if err.Error() != want {
		t.Errorf("error = %q\nwant      %q", err.Error(), want)
	}
	if pe.Code() != codes.Unknown || pe.Kind != api.KindDeleteItemAction || pe.Name != "example.io/cleanup" || pe.Method != "Execute" {
		t.Errorf("PluginError = %+v, code %v", pe, pe.Code())
	}
	if pe.Message() != "snapshot snap-1 is still in use" {
		t.Errorf("Message = %q", pe.Message())
	}
	stack := pe.Stack()
	if len(stack) < 2 || !strings.HasSuffix(stack[0].Function, ".stackErr") || !strings.HasSuffix(stack[1].Function, ".wrapped") {
		t.Errorf("stack = %+v, want stackErr then wrapped", stack)
	}
	// The code is reachable the standard ways too.
	if st, ok := status.FromError(err); !ok || st.Code() != codes.Unknown {
		t.Errorf("status.FromError = %v, %v", st, ok)
	}
	var coder interface{ Code() codes.Code }
	if !errors.As(err, &coder) || coder.Code() != codes.Unknown {
		t.Error("errors.As found no Code()")
	}
}

func TestErrorWithoutStackNamesTheMethod(t *testing.T) {
	dia := failingClient(t, time.Minute)
	_, err := dia.AppliesTo()
	pe := pluginError(t, err)
	if !strings.HasPrefix(err.Error(), "DeleteItemAction example.io/cleanup: AppliesTo: no selector today (at errors_test.go:") {
		t.Errorf("error = %q", err)
	}
	if s := pe.Stack(); len(s) != 1 || !strings.HasSuffix(s[0].Function, "failingDIA.AppliesTo") {
		t.Errorf("stack = %+v, want the method that returned the error", s)
	}
}

func TestErrorFromPkgErrors(t *testing.T) {
	pe := pluginError(t, execute(failingClient(t, time.Minute), "pkg-errors"))
	if s := pe.Stack(); len(s) == 0 || !strings.HasSuffix(s[0].Function, ".pkgErrorsStyle") || filepath.Base(s[0].File) != "errors_test.go" {
		t.Errorf("stack = %+v, want pkgErrorsStyle first", s)
	}
}

// A plugin's own gRPC status must not pass for a dead process: hosts restart
// plugins on Unavailable.
func TestPluginStatusIsNotTransportStatus(t *testing.T) {
	pe := pluginError(t, execute(failingClient(t, time.Minute), "grpc-status"))
	if pe.Code() != codes.Unknown || !strings.Contains(pe.Message(), "the cloud API is down") {
		t.Errorf("code %v, message %q", pe.Code(), pe.Message())
	}
}

func TestPanicBecomesError(t *testing.T) {
	dia := failingClient(t, time.Minute)
	for _, tc := range []struct{ item, message, function string }{
		{"panic", "panic: boom", "failingDIA.Execute"},
		{"nil-map", "panic: assignment to entry in nil map", "failingDIA.Execute"},
		{"nil-pointer", "panic: runtime error: invalid memory address or nil pointer dereference", "failingDIA.Execute"},
	} {
		pe := pluginError(t, execute(dia, tc.item))
		if pe.Code() != codes.Aborted || pe.Message() != tc.message {
			t.Errorf("%s: code %v, message %q; want Aborted, %q", tc.item, pe.Code(), pe.Message(), tc.message)
		}
		if s := pe.Stack(); len(s) == 0 || !strings.HasSuffix(s[0].Function, tc.function) {
			t.Errorf("%s: stack = %+v, want %s first", tc.item, s, tc.function)
		}
	}
	// The process is still serving.
	if err := execute(dia, "fine"); err != nil {
		t.Errorf("after the panics: %v", err)
	}
}

func TestPanicInInitializer(t *testing.T) {
	c := connect(t, NewServer().RegisterDeleteItemAction("example.io/bad", func(*slog.Logger) (api.DeleteItemAction, error) {
		panic("no config")
	}))
	dia := must[api.DeleteItemAction](t)(DeleteItemActionClient(dispense(t, c, api.KindDeleteItemAction), "example.io/bad", time.Minute))
	if pe := pluginError(t, execute(dia, "x")); pe.Code() != codes.Aborted || pe.Message() != "panic: no config" {
		t.Errorf("code %v, message %q", pe.Code(), pe.Message())
	}
}

func TestUnknownPlugin(t *testing.T) {
	c := connect(t, NewServer().RegisterDeleteItemAction("example.io/cleanup", instance[api.DeleteItemAction](&fakeDIA{})))
	dia := must[api.DeleteItemAction](t)(DeleteItemActionClient(dispense(t, c, api.KindDeleteItemAction), "example.io/nope", time.Minute))
	err := execute(dia, "x")
	pe := pluginError(t, err)
	if pe.Code() != codes.NotFound || !strings.Contains(err.Error(), `"example.io/nope"`) || !strings.Contains(err.Error(), "example.io/cleanup") {
		t.Errorf("code %v, error %q; want NotFound naming the plugin asked for and the ones there are", pe.Code(), err)
	}
}

func TestTimeout(t *testing.T) {
	err := execute(failingClient(t, 100*time.Millisecond), "sleep")
	if pe := pluginError(t, err); pe.Code() != codes.DeadlineExceeded {
		t.Errorf("code %v, want DeadlineExceeded", pe.Code())
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, context.DeadlineExceeded) = false", err)
	}
}

func TestInitializer(t *testing.T) {
	var calls atomic.Int32
	var logged *slog.Logger
	s := NewServer().
		RegisterDeleteItemAction("example.io/lazy", func(log *slog.Logger) (api.DeleteItemAction, error) {
			calls.Add(1)
			logged = log
			return &fakeDIA{id: "lazy"}, nil
		}).
		RegisterDeleteItemAction("example.io/broken", func(*slog.Logger) (api.DeleteItemAction, error) {
			calls.Add(100)
			return nil, Errorf("no credentials for %s", "bucket")
		})
	c := connect(t, s)
	d := dispense(t, c, api.KindDeleteItemAction)
	if _, err := PluginListerClient(dispense(t, c, api.KindPluginLister)).ListPlugins(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("initializers ran %d times before any plugin was used", n)
	}
	lazy := must[api.DeleteItemAction](t)(DeleteItemActionClient(d, "example.io/lazy", time.Minute))
	for range 3 {
		if err := execute(lazy, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 1 || logged == nil {
		t.Errorf("initializer ran %d times (logger %v); want once, reused", n, logged)
	}
	broken := must[api.DeleteItemAction](t)(DeleteItemActionClient(d, "example.io/broken", time.Minute))
	err := execute(broken, "x")
	if want := "DeleteItemAction example.io/broken: Execute: initializing DeleteItemAction plugin example.io/broken: no credentials for bucket (at errors_test.go:"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %q, want prefix %q", err, want)
	}
	_ = execute(broken, "x")
	if n := calls.Load(); n != 201 {
		t.Errorf("a failed initializer is retried: calls = %d, want 201", n)
	}
}

func TestRegistrationErrors(t *testing.T) {
	ok := instance[api.DeleteItemAction](&fakeDIA{})
	if err := NewServer().RegisterDeleteItemAction("example.io/fine", ok).Err(); err != nil {
		t.Errorf("Err = %v", err)
	}
	err := NewServer().
		RegisterDeleteItemAction("cleanup", ok).
		RegisterDeleteItemAction("example.io/twice", ok).
		RegisterDeleteItemAction("example.io/twice", ok).
		RegisterObjectStore("example.io/nil", nil).
		Err()
	for _, want := range []string{`"cleanup" must be <DNS-1123 subdomain>/<name>`, "example.io/twice: the name is registered twice", "example.io/nil: no initializer"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Err = %v, want it to say %q", err, want)
		}
	}
	// The same name may serve two kinds.
	if err := NewServer().RegisterDeleteItemAction("example.io/x", ok).RegisterBackupItemAction("example.io/x", instance[api.BackupItemAction](&fakeBIA{})).Err(); err != nil {
		t.Errorf("Err = %v", err)
	}
}

// Serve itself refuses a bad registration: the test binary runs this test
// again as a plugin process, which must exit saying why.
func TestServeRefusesBadName(t *testing.T) {
	if os.Getenv("FRAMEWORK_TEST_SERVE_BAD_NAME") == "1" {
		NewServer().RegisterDeleteItemAction("cleanup", instance[api.DeleteItemAction](&fakeDIA{})).Serve()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeRefusesBadName$")
	cmd.Env = append(os.Environ(), "FRAMEWORK_TEST_SERVE_BAD_NAME=1", Handshake.MagicCookieKey+"="+Handshake.MagicCookieValue)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("Serve with a bad name: %v\n%s", err, out)
	}
	if want := `cannot serve plugins: registering DeleteItemAction plugin: plugin name \"cleanup\" must be <DNS-1123 subdomain>/<name>`; !strings.Contains(string(out), want) {
		t.Errorf("output does not say %q:\n%s", want, out)
	}
}
