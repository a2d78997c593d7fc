package framework

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
)

// base is what every client of one plugin shares: who it talks to, and how
// long a call may take.
type base struct {
	kind    api.Kind
	name    string
	timeout time.Duration
}

func (b base) context() (context.Context, context.CancelFunc) {
	if b.timeout <= 0 {
		return context.WithCancel(context.Background())
	}
	return context.WithTimeout(context.Background(), b.timeout)
}

func (b base) who() string {
	if b.name == "" {
		return string(b.kind)
	}
	return fmt.Sprintf("%s %s", b.kind, b.name)
}

// fail turns an error of a call into one that says which plugin failed; a
// gRPC status becomes a *PluginError, which keeps the code.
func (b base) fail(method string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s: %s: %w", b.who(), method, err)
		}
		st = status.FromContextError(err)
	}
	pe := &PluginError{Kind: b.kind, Name: b.name, Method: method, status: st}
	for _, detail := range st.Details() {
		if stack, ok := detail.(*generated.Stack); ok {
			for _, f := range stack.GetFrames() {
				pe.stack = append(pe.stack, StackFrame{File: f.GetFile(), Line: int(f.GetLine()), Function: f.GetFunction()})
			}
			break
		}
	}
	return pe
}

// local is an error the client met before or after the call itself (an item
// that does not encode, a reply that does not decode).
func (b base) local(method string, err error) error {
	return fmt.Errorf("%s: %s: %w", b.who(), method, err)
}

// PluginError is a failed call to a plugin: the plugin's own error, or the
// transport's (timeout, dead process). It is also a gRPC status error:
// status.FromError and status.Code see its code.
type PluginError struct {
	Kind   api.Kind
	Name   string
	Method string

	status *status.Status
	stack  []StackFrame
}

// StackFrame is one frame of the stack a plugin sent with its error.
type StackFrame struct {
	File     string
	Line     int
	Function string
}

func (e *PluginError) Error() string {
	who := string(e.Kind)
	if e.Name != "" {
		who += " " + e.Name
	}
	msg := fmt.Sprintf("%s: %s: %s", who, e.Method, e.status.Message())
	if len(e.stack) > 0 {
		msg += fmt.Sprintf(" (at %s:%d)", filepath.Base(e.stack[0].File), e.stack[0].Line)
	}
	return msg
}

// Code is the gRPC status code: Unknown for the plugin's own errors, Aborted
// for a panic in the plugin, NotFound for a plugin name the process does not
// serve, DeadlineExceeded for a timeout, Unavailable for a dead process.
func (e *PluginError) Code() codes.Code { return e.status.Code() }

// Message is the plugin's message, without the plugin's name or location.
func (e *PluginError) Message() string { return e.status.Message() }

// Stack is where in the plugin the error came from, innermost frame first;
// empty when the plugin sent none.
func (e *PluginError) Stack() []StackFrame { return e.stack }

// GRPCStatus lets status.FromError and status.Code find the status.
func (e *PluginError) GRPCStatus() *status.Status { return e.status }

// Is makes a timed out or cancelled call match context.DeadlineExceeded or
// context.Canceled, as the same failure of a local call would.
func (e *PluginError) Is(target error) bool {
	switch e.status.Code() {
	case codes.DeadlineExceeded:
		return target == context.DeadlineExceeded
	case codes.Canceled:
		return target == context.Canceled
	}
	return false
}
