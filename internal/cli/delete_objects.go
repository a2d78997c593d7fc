package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// newObjectDeleteCommand builds `delete NAME... | --all | --selector` for a
// kind whose deletion is the deletion of its object (restores, schedules,
// storage locations), with Velero's flags. deleted prints what happened to
// one object and may clean up after it.
func newObjectDeleteCommand[T any, PT objectPtr[T], L client.ObjectList](f *Factory, k kindSpec[T, PT, L], short, long, example string,
	deleted func(ctx context.Context, c client.Client, out io.Writer, obj PT) error,
) *cobra.Command {
	var (
		all      bool
		selector string
		confirm  bool
	)
	cmd := &cobra.Command{
		Use:     "delete [NAME...] [--selector SELECTOR | --all]",
		Short:   short,
		Long:    long,
		Example: example,
		Args:    cobra.ArbitraryArgs,
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			chosen := 0
			for _, set := range []bool{len(args) > 0, all, selector != ""} {
				if set {
					chosen++
				}
			}
			if chosen != 1 {
				return fmt.Errorf("name the %s to delete, or give --selector or --all (exactly one of the three)", k.plural())
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// Named objects that do not exist are reported, and the others
			// deleted anyway, as Velero does.
			var errs []error
			var objs []PT
			if len(args) > 0 {
				for _, name := range args {
					obj, err := k.get(ctx, c, f.Namespace, name)
					if err != nil {
						errs = append(errs, err)
						continue
					}
					objs = append(objs, obj)
				}
			} else {
				list, err := k.list(ctx, c, f.Namespace, nil, selector)
				if err != nil {
					return err
				}
				items := *k.items(list)
				for i := range items {
					objs = append(objs, PT(&items[i]))
				}
			}
			if len(objs) == 0 {
				if len(errs) == 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "No %s found in namespace %q.\n", k.plural(), f.Namespace)
				}
				return errors.Join(errs...)
			}
			if !confirm {
				names := make([]string, len(objs))
				for i, o := range objs {
					names[i] = o.GetName()
				}
				if err := askToDelete(cmd, k.word, names); err != nil {
					return errors.Join(append(errs, err)...)
				}
			}
			out := cmd.OutOrStdout()
			for _, obj := range objs {
				callCtx, cancel := callCtx(ctx)
				err := c.Delete(callCtx, obj)
				cancel()
				if err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("deleting %s %q: %w", k.word, obj.GetName(), err))
					continue
				}
				if err := deleted(ctx, c, out, obj); err != nil {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		}),
	}
	fl := cmd.Flags()
	fl.BoolVar(&all, "all", false, "delete every "+k.word+" in the namespace")
	fl.StringVarP(&selector, "selector", "l", "", "delete the "+k.plural()+" whose labels match this selector")
	fl.BoolVar(&confirm, "confirm", false, "do not ask for confirmation")
	return cmd
}

// askToDelete asks on a terminal; anywhere else an unconfirmed deletion is
// refused, so a script cannot delete by accident. (Velero reads an answer
// from any standard input; Lifeboat wants --confirm there.)
func askToDelete(cmd *cobra.Command, word string, names []string) error {
	what := word + " " + names[0]
	if len(names) > 1 {
		what = fmt.Sprintf("%d %ss (%s)", len(names), word, strings.Join(names, ", "))
	}
	in, ok := cmd.InOrStdin().(*os.File)
	if !ok || !isTerminal(in) {
		return fmt.Errorf("refusing to delete %s without --confirm: standard input is not a terminal, so there is no one to ask", what)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Are you sure you want to delete %s? [y/N] ", what)
	answer, _ := bufio.NewReader(in).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return errors.New("nothing deleted")
	}
	return nil
}
