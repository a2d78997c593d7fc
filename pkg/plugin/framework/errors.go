package framework

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
)

// maxFrames bounds the stack sent with an error: the host reports the first
// frame, and a deep stack only makes every status message heavier.
const maxFrames = 32

// WithStack records where it was called, so that the error, returned by a
// plugin, reaches the host with the file and line it came from. An error
// that already carries a stack is returned unchanged.
func WithStack(err error) error {
	if err == nil || stackPCs(err) != nil {
		return err
	}
	return &stackError{err: err, pcs: callers(3)}
}

// Errorf is fmt.Errorf that records where it was called (see WithStack).
func Errorf(format string, args ...any) error {
	return &stackError{err: fmt.Errorf(format, args...), pcs: callers(3)}
}

type stackError struct {
	err error
	pcs []uintptr
}

func (e *stackError) Error() string { return e.err.Error() }
func (e *stackError) Unwrap() error { return e.err }

func callers(skip int) []uintptr {
	pcs := make([]uintptr, maxFrames)
	return pcs[:runtime.Callers(skip, pcs)]
}

// stackPCs finds the program counters recorded in err's chain: by WithStack
// or Errorf, or by github.com/pkg/errors (which many Velero plugins use, and
// which we recognise by its StackTrace method rather than import). The
// innermost stack wins: it is the closest to where the error was created.
func stackPCs(err error) []uintptr {
	var found []uintptr
	for e := err; e != nil; e = unwrapOne(e) {
		if pcs := ownPCs(e); pcs != nil {
			found = pcs
		}
	}
	return found
}

func unwrapOne(err error) error {
	switch e := err.(type) { //nolint:errorlint // one level at a time: stackPCs walks the chain itself
	case interface{ Unwrap() error }:
		return e.Unwrap()
	case interface{ Unwrap() []error }:
		if errs := e.Unwrap(); len(errs) > 0 {
			return errs[0]
		}
	}
	return nil
}

func ownPCs(err error) []uintptr {
	if s, ok := err.(*stackError); ok { //nolint:errorlint // this level only: stackPCs walks the chain itself
		return s.pcs
	}
	// pkg/errors: StackTrace() errors.StackTrace, a slice of Frame, each a
	// uintptr holding a return program counter as runtime.Callers gives it.
	m := reflect.ValueOf(err).MethodByName("StackTrace")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return nil
	}
	trace := m.Call(nil)[0]
	if trace.Kind() != reflect.Slice || trace.Type().Elem().Kind() != reflect.Uintptr || trace.Len() == 0 {
		return nil
	}
	pcs := make([]uintptr, min(trace.Len(), maxFrames))
	for i := range pcs {
		pcs[i] = uintptr(trace.Index(i).Uint())
	}
	return pcs
}

func framesOf(pcs []uintptr) []*generated.StackFrame {
	if len(pcs) == 0 {
		return nil
	}
	var out []*generated.StackFrame
	frames := runtime.CallersFrames(pcs)
	for len(out) < maxFrames {
		f, more := frames.Next()
		if f.Function != "" || f.File != "" {
			out = append(out, &generated.StackFrame{File: f.File, Line: int32(f.Line), Function: f.Function})
		}
		if !more {
			break
		}
	}
	return out
}

// methodFrame stands in for a stack when the implementation's error has
// none: it names the method that returned the error, at its declaration.
func methodFrame(impl any, method string) *generated.StackFrame {
	if a, ok := impl.(interface{ adapted() any }); ok {
		impl = a.adapted()
	}
	t := reflect.TypeOf(impl)
	if t == nil {
		return nil
	}
	m, ok := t.MethodByName(method)
	// A value-receiver method reached through a pointer is a generated
	// wrapper without a source position; the value type has the real one.
	if t.Kind() == reflect.Pointer {
		if vm, vok := t.Elem().MethodByName(method); vok {
			m, ok = vm, true
		}
	}
	if !ok {
		return nil
	}
	fn := runtime.FuncForPC(m.Func.Pointer())
	if fn == nil {
		return nil
	}
	file, line := fn.FileLine(fn.Entry())
	return &generated.StackFrame{File: file, Line: int32(line), Function: fn.Name()}
}

// panicFrames is the stack of a panic being recovered, starting at the
// statement that panicked: the frames of the recovery itself and of the
// runtime's panic machinery are dropped.
func panicFrames() []*generated.StackFrame {
	all := framesOf(callers(1))
	for i, f := range all {
		if f.Function != "runtime.gopanic" {
			continue
		}
		rest := all[i+1:]
		for len(rest) > 0 && strings.HasPrefix(rest[0].Function, "runtime.") {
			rest = rest[1:]
		}
		return rest
	}
	return all
}

// requestError is a failure of the exchange with the host rather than of
// the plugin: a request that does not decode (InvalidArgument), a host that
// went away mid-stream. It travels without a stack, as no plugin code is to
// blame.
type requestError struct {
	code codes.Code
	err  error
}

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

func badRequest(err error) error {
	return &requestError{code: codes.InvalidArgument, err: err}
}

// implStatus turns an error out of an implementation into the status the
// host receives. Its code is always Unknown, whatever status the plugin's
// own error may carry (say, Unavailable from a cloud API): the host reads
// Unavailable and DeadlineExceeded as a dead or hung plugin process and
// restarts it, which would be wrong for a plugin that merely failed.
func implStatus(err error, impl any, method string) error {
	var re *requestError
	if errors.As(err, &re) {
		return status.Error(re.code, err.Error())
	}
	frames := framesOf(stackPCs(err))
	if len(frames) == 0 {
		if f := methodFrame(impl, method); f != nil {
			frames = append(frames, f)
		}
	}
	return withStack(status.New(codes.Unknown, err.Error()), frames)
}

func withStack(st *status.Status, frames []*generated.StackFrame) error {
	if len(frames) == 0 {
		return st.Err()
	}
	detailed, err := st.WithDetails(&generated.Stack{Frames: frames})
	if err != nil {
		// The message still reaches the host; only the location is lost.
		return st.Err()
	}
	return detailed.Err()
}
