package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/internal/install"
)

// pluginFieldManager owns the init containers the plugin verbs add, apart
// from install's: re-running install keeps them, and brings back a plugin
// install itself was given (--plugins) if `plugin remove` took it out.
const pluginFieldManager = "lifeboat-plugin"

func newPluginAddCommand(f *Factory) *cobra.Command {
	var pullPolicy string
	cmd := &cobra.Command{
		Use:   "add IMAGE",
		Short: "Add a plugin image to the server's Deployment",
		Long: "Add a plugin to the server's Deployment (velero, in the namespace given by -n), as `velero plugin add`\n" +
			"does: an init container named after the image, with the plugins volume mounted at /target, where\n" +
			"the image's entry point copies its binaries. The server's pod restarts to load it; backups, restores\n" +
			"and deletions it was running are picked up again by the new pod.",
		Example: `  lifeboat plugin add velero/velero-plugin-for-aws:v1.12.0`,
		Args:    cobra.ExactArgs(1),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			image := args[0]
			switch corev1.PullPolicy(pullPolicy) {
			case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
			default:
				return fmt.Errorf("invalid --image-pull-policy %q: use Always, IfNotPresent or Never", pullPolicy)
			}
			policy := corev1.PullPolicy(pullPolicy)
			if policy == "" {
				policy = install.PullPolicy(image)
			}
			added := install.PluginContainer(image, policy)
			err := editServer(cmd.Context(), f, func(d *appsv1.Deployment) error {
				spec := &d.Spec.Template.Spec
				if i := slices.IndexFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == added.Name }); i >= 0 {
					if spec.InitContainers[i].Image == image {
						return errAlreadyThere
					}
					return fmt.Errorf("init container %q already runs %s: remove it first with `lifeboat plugin remove %s`", added.Name, spec.InitContainers[i].Image, added.Name)
				}
				if err := ensurePluginsVolume(spec); err != nil {
					return err
				}
				spec.InitContainers = append(spec.InitContainers, added)
				return nil
			})
			if err == errAlreadyThere {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Plugin %s is already in Deployment %s/%s (init container %s).\n", image, f.Namespace, install.ServerName, added.Name)
				return err
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deployment %s/%s: init container %s (%s) added; the server's pod restarts to load it.\n", f.Namespace, install.ServerName, added.Name, image)
			return err
		}),
	}
	cmd.Flags().StringVar(&pullPolicy, "image-pull-policy", "", "pull policy of the plugin image: Always, IfNotPresent or Never (default: Always for an untagged or :latest image, else IfNotPresent)")
	return cmd
}

func newPluginRemoveCommand(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME|IMAGE",
		Short: "Remove a plugin from the server's Deployment, by init container name or image",
		Long: "Remove a plugin's init container from the server's Deployment (velero, in the namespace given by -n),\n" +
			"found by its name or its image, as `velero plugin remove` does. The server's pod restarts without it.\n" +
			"A plugin given to install with --plugins comes back when install runs again with it.",
		Example: `  lifeboat plugin remove velero/velero-plugin-for-aws:v1.12.0
  lifeboat plugin remove velero-velero-plugin-for-aws`,
		Args: cobra.ExactArgs(1),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			var removed corev1.Container
			err := editServer(cmd.Context(), f, func(d *appsv1.Deployment) error {
				inits := d.Spec.Template.Spec.InitContainers
				i := slices.IndexFunc(inits, func(c corev1.Container) bool { return c.Name == args[0] || c.Image == args[0] })
				if i < 0 {
					var have []string
					for _, c := range inits {
						have = append(have, c.Name+" ("+c.Image+")")
					}
					if len(have) == 0 {
						have = []string{"none"}
					}
					return fmt.Errorf("no plugin init container named or running %q in Deployment %s/%s; it has: %s",
						args[0], d.Namespace, d.Name, strings.Join(have, ", "))
				}
				removed = inits[i]
				d.Spec.Template.Spec.InitContainers = slices.Delete(inits, i, i+1)
				return nil
			})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deployment %s/%s: init container %s (%s) removed; the server's pod restarts without it.\n",
				f.Namespace, install.ServerName, removed.Name, removed.Image)
			return err
		}),
	}
}

var errAlreadyThere = fmt.Errorf("already there")

// editServer reads the server's Deployment, lets edit change it and writes
// it back, again on a conflict with another writer.
func editServer(ctx context.Context, f *Factory, edit func(*appsv1.Deployment) error) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: f.Namespace, Name: install.ServerName}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		cctx, cancel := callCtx(ctx)
		defer cancel()
		if err := c.Get(cctx, key, d); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("no Deployment %s/%s: plugins are added to a server installed with `lifeboat install` (-n names its namespace); "+
					"a server run as a process loads the plugins of its --plugin-dir", key.Namespace, key.Name)
			}
			return fmt.Errorf("reading Deployment %s/%s: %w", key.Namespace, key.Name, err)
		}
		if err := edit(d); err != nil {
			return err
		}
		if err := c.Update(cctx, d, client.FieldOwner(pluginFieldManager)); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("updating Deployment %s/%s: %w", key.Namespace, key.Name, err)
		}
		return nil
	})
}

// ensurePluginsVolume gives the pod the plugins volume and the server
// container its mount, when a Deployment made by hand lacks them.
func ensurePluginsVolume(spec *corev1.PodSpec) error {
	const volume = "plugins"
	if slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == volume }) {
		return nil
	}
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == install.ServerName })
	if i < 0 {
		return fmt.Errorf("the Deployment has no container %q to mount the plugins volume in", install.ServerName)
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: install.PluginDir})
	return nil
}
