package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func newBackupLogsCommand(f *Factory) *cobra.Command {
	var timeout time.Duration
	var tlsOpts *tlsFlags
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print the log of a backup",
		Args:  cobra.ExactArgs(1),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			name := args[0]
			c, err := f.Client()
			if err != nil {
				return err
			}
			// Checked first so a typo reads "backup not found" instead of a
			// download request that is never answered.
			b, err := backupKind.get(cmd.Context(), c, f.Namespace, name)
			if err != nil {
				return err
			}
			d, err := f.storeDownloader(cmd.Context(), c, timeout, tlsOpts, b.Spec.StorageLocation, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			err = copyGzipped(cmd.Context(), d, v1.DownloadTargetKindBackupLog, name,
				fmt.Sprintf("log of backup %q", name), cmd.OutOrStdout())
			if errors.Is(err, errFileNotFound) {
				return fmt.Errorf("backup %q has no log yet; logs are uploaded when a backup finishes: %w", name, err)
			}
			return err
		}),
	}
	cmd.Flags().DurationVar(&timeout, "timeout", defaultDownloadTimeout, "how long to wait for the server to serve the log")
	tlsOpts = bindTLSFlags(cmd.Flags(), f)
	return cmd
}

func newBackupDownloadCommand(f *Factory) *cobra.Command {
	var (
		output  string
		force   bool
		timeout time.Duration
		tlsOpts *tlsFlags
	)
	cmd := &cobra.Command{
		Use:   "download NAME",
		Short: "Download the contents of a backup (its tarball)",
		Long: "Download writes the backup's tarball, as stored in object storage, to NAME-data.tar.gz\n" +
			"in the current directory (or the file given by -o; \"-\" for standard output).",
		Args: cobra.ExactArgs(1),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if output == "" {
				output = name + "-data.tar.gz"
			}
			toStdout := output == "-"
			if !toStdout && !force {
				if _, err := os.Stat(output); err == nil {
					return fmt.Errorf("%s already exists; use --force to overwrite it", output)
				} else if !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("checking --output %s: %w", output, err)
				}
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			b, err := backupKind.get(cmd.Context(), c, f.Namespace, name)
			if err != nil {
				return err
			}
			d, err := f.storeDownloader(cmd.Context(), c, timeout, tlsOpts, b.Spec.StorageLocation, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			rc, err := d.open(cmd.Context(), v1.DownloadTargetKindBackupContents, name)
			if errors.Is(err, errFileNotFound) {
				return fmt.Errorf("backup %q has no contents to download; only finished backups do: %w", name, err)
			}
			if err != nil {
				return err
			}
			defer rc.Close()
			if toStdout {
				if _, err := io.Copy(cmd.OutOrStdout(), rc); err != nil {
					return fmt.Errorf("downloading backup %q: %w", name, err)
				}
				return nil
			}
			path, err := writeFileAtomic(output, rc)
			if err != nil {
				return fmt.Errorf("downloading backup %q: %w", name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Backup %s has been downloaded to %s\n", name, path)
			return nil
		}),
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", `file to write (default NAME-data.tar.gz; "-" for standard output)`)
	cmd.Flags().BoolVar(&force, "force", false, "overwrite the output file if it exists")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultDownloadTimeout, "how long to wait for the server to serve the download")
	tlsOpts = bindTLSFlags(cmd.Flags(), f)
	return cmd
}

// writeFileAtomic writes r to a temporary file next to path and renames it
// into place, so an interrupted download never leaves a truncated tarball
// under the final name. It returns the absolute path written.
func writeFileAtomic(path string, r io.Reader) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".partial-*")
	if err != nil {
		return "", err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, r); err != nil {
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	// CreateTemp made the file 0600, which suits a tarball full of Secrets,
	// so it keeps that mode under its final name.
	if err := os.Rename(tmp.Name(), abs); err != nil {
		return "", err
	}
	done = true
	return abs, nil
}
