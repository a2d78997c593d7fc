package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// objectPtr lets generic code allocate a T and still hand it to the client.
type objectPtr[T any] interface {
	*T
	client.Object
}

// kindSpec is what `get` and `describe` need to know about one velero.io
// kind, so that backups, restores and schedules share one implementation
// of those verbs and cannot drift apart in flags, messages or output shape.
// T is the object type (v1.Backup), PT its pointer and L its list pointer.
type kindSpec[T any, PT objectPtr[T], L client.ObjectList] struct {
	// word is the kind as users type it ("backup"); messages use it and
	// its plural, word+"s".
	word       string
	newList    func() L
	items      func(L) *[]T
	printTable func(f *Factory, w io.Writer, items []T) error
	// getFlags, when set, binds flags of the kind's own to `get` and
	// returns the filter they make (e.g. backup-location get --default).
	getFlags func(fl *pflag.FlagSet) func(items []T) []T
}

func (k kindSpec[T, PT, L]) plural() string { return k.word + "s" }

func (k kindSpec[T, PT, L]) get(ctx context.Context, c client.Client, namespace, name string) (PT, error) {
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	obj := PT(new(T))
	err := c.Get(callCtx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) && !isCRDMissing(err) {
		return nil, &notFoundError{kind: k.word, name: name, namespace: namespace}
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %q: %w", k.word, name, err)
	}
	return obj, nil
}

// list reads the named objects in the order given, or lists them all
// (filtered by selector) sorted by name.
func (k kindSpec[T, PT, L]) list(ctx context.Context, c client.Client, namespace string, names []string, selector string) (L, error) {
	var zero L
	list := k.newList()
	items := k.items(list)
	if len(names) > 0 {
		for _, name := range names {
			obj, err := k.get(ctx, c, namespace, name)
			if err != nil {
				return zero, err
			}
			*items = append(*items, *obj)
		}
		return list, nil
	}
	opts, err := listOptions(namespace, selector)
	if err != nil {
		return zero, err
	}
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	if err := c.List(callCtx, list, opts...); err != nil {
		return zero, fmt.Errorf("listing %s in namespace %q: %w", k.plural(), namespace, err)
	}
	slices.SortFunc(*items, func(a, b T) int { return strings.Compare(PT(&a).GetName(), PT(&b).GetName()) })
	return list, nil
}

// listOptions lists in namespace, filtered by the --selector flag's value.
func listOptions(namespace, selector string) ([]client.ListOption, error) {
	opts := []client.ListOption{client.InNamespace(namespace)}
	if selector != "" {
		sel, err := labels.Parse(selector)
		if err != nil {
			return nil, fmt.Errorf("invalid --selector %q: %w", selector, err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	return opts, nil
}

// printEncodedObjects prints one object as itself and anything else as a
// list, even with one item, so that `get NAME -o json | jq .status.phase`
// works and scripts that ask for several always get the same shape.
func (k kindSpec[T, PT, L]) printEncodedObjects(w io.Writer, format string, names []string, list L) error {
	if items := *k.items(list); len(names) == 1 && len(items) == 1 {
		return printEncoded(w, format, PT(&items[0]))
	}
	return printEncoded(w, format, list)
}

func newGetCommand[T any, PT objectPtr[T], L client.ObjectList](f *Factory, k kindSpec[T, PT, L]) *cobra.Command {
	var (
		output   string
		selector string
		filter   func([]T) []T
	)
	cmd := &cobra.Command{
		Use:   "get [NAME...]",
		Short: "List " + k.plural(),
		Args:  cobra.ArbitraryArgs,
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output, formatTable, formatJSON, formatYAML); err != nil {
				return err
			}
			if len(args) > 0 && selector != "" {
				return fmt.Errorf("--selector cannot be combined with %s names", k.word)
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			list, err := k.list(cmd.Context(), c, f.Namespace, args, selector)
			if err != nil {
				return err
			}
			if filter != nil {
				*k.items(list) = filter(*k.items(list))
			}
			out := cmd.OutOrStdout()
			if output != formatTable {
				return k.printEncodedObjects(out, output, args, list)
			}
			items := *k.items(list)
			if len(items) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "No %s found in namespace %q.\n", k.plural(), f.Namespace)
				return nil
			}
			return k.printTable(f, out, items)
		}),
	}
	cmd.Flags().StringVarP(&output, "output", "o", formatTable, "output format: table, json or yaml")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only list "+k.plural()+" whose labels match this selector")
	if k.getFlags != nil {
		filter = k.getFlags(cmd.Flags())
	}
	return cmd
}

// newDescribeCommand builds `describe [NAME...]`; describe prints one
// object for people to read, and the caller adds the flags it needs. With
// -o json|yaml, structured (when set) returns the object's structured
// description instead; kinds without one print their objects.
func newDescribeCommand[T any, PT objectPtr[T], L client.ObjectList](f *Factory, k kindSpec[T, PT, L], long string,
	describe func(ctx context.Context, c client.Client, w io.Writer, obj PT) error,
	structured func(ctx context.Context, c client.Client, obj PT) (any, error),
) *cobra.Command {
	var output, selector string
	cmd := &cobra.Command{
		Use:   "describe [NAME...]",
		Short: "Show the details of " + k.plural(),
		Long:  long,
		Args:  cobra.ArbitraryArgs,
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			if output == "" {
				output = formatTable
			}
			if err := checkFormat(output, formatTable, formatJSON, formatYAML); err != nil {
				return err
			}
			if len(args) > 0 && selector != "" {
				return fmt.Errorf("--selector cannot be combined with %s names", k.word)
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			list, err := k.list(cmd.Context(), c, f.Namespace, args, selector)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			items := *k.items(list)
			if len(items) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "No %s found in namespace %q.\n", k.plural(), f.Namespace)
				return nil
			}
			if output != formatTable {
				if structured == nil {
					return k.printEncodedObjects(out, output, args, list)
				}
				descs := make([]any, 0, len(items))
				for i := range items {
					d, err := structured(cmd.Context(), c, PT(&items[i]))
					if err != nil {
						return err
					}
					descs = append(descs, d)
				}
				// One name asked for: its description; else a list, so
				// the shape does not depend on how many matched.
				if len(args) == 1 {
					return encode(out, output, descs[0])
				}
				return encode(out, output, descs)
			}
			for i := range items {
				if i > 0 {
					fmt.Fprintln(out)
				}
				if err := describe(cmd.Context(), c, out, PT(&items[i])); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	what := "the " + k.plural() + " as json or yaml"
	if structured != nil {
		what = "a structured description as json or yaml"
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "print "+what+" instead of the text description")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "describe the "+k.plural()+" whose labels match this selector")
	return cmd
}
