package volumehelper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// NewVolumeHelperForBackup returns a helper configured from the backup
// itself: its resource policy (loaded with LoadPolicies), snapshotVolumes,
// defaultVolumesToFsBackup (or the deprecated defaultVolumesToRestic),
// namespaces and resource filters. ctx bounds loading the policy.
func NewVolumeHelperForBackup(ctx context.Context, backup *v1.Backup, client crclient.Client, logger *slog.Logger) (VolumeHelper, error) {
	if backup == nil {
		return nil, errors.New("volumehelper: no backup given")
	}
	if client == nil {
		return nil, errors.New("volumehelper: a client is required to load the resource policy and look up volumes")
	}
	policies, err := LoadPolicies(ctx, backup, client)
	if err != nil {
		return nil, err
	}
	return NewVolumeHelperForSpec(&backup.Spec, policies, client, logger)
}

// NewVolumeHelperForSpec is NewVolumeHelperForBackup for a backup spec and
// a resource policy the caller has already (from LoadPolicies, or another
// source as `lifeboat policy explain --policy-file` has): what a backup
// with that spec and policy would decide. policies may be nil.
func NewVolumeHelperForSpec(spec *v1.BackupSpec, policies *policy.Policies, client crclient.Client, logger *slog.Logger) (VolumeHelper, error) {
	if spec == nil {
		return nil, errors.New("volumehelper: no backup spec given")
	}
	namespaces, skip := backupNamespaces(spec)
	return newHelper(config{
		policies:                 policies,
		snapshotVolumes:          spec.SnapshotVolumes,
		logger:                   logger,
		client:                   client,
		defaultVolumesToFSBackup: defaultVolumesToFSBackup(spec),
		backupExcludePVC:         excludesClaims(spec, policies),
		namespaces:               namespaces,
		skipNamespaces:           skip,
	})
}

// LoadPolicies reads the resource policy the backup names in
// spec.resourcePolicy from its ConfigMap, which lives in the backup's
// namespace. It returns nil, nil when the backup names none, or, as
// Velero, a reference of a kind other than configmap (in any case; the
// apiGroup is not read): PolicyKindWarning words that for the backup's
// warnings.
func LoadPolicies(ctx context.Context, backup *v1.Backup, client crclient.Reader) (*policy.Policies, error) {
	ref := backup.Spec.ResourcePolicy
	if ref == nil || !strings.EqualFold(ref.Kind, "configmap") {
		return nil, nil
	}
	if ref.Name == "" {
		return nil, fmt.Errorf("backup %s/%s: spec.resourcePolicy.name is empty; name the ConfigMap holding the resource policy", backup.Namespace, backup.Name)
	}
	cm := &corev1.ConfigMap{}
	if err := client.Get(ctx, crclient.ObjectKey{Namespace: backup.Namespace, Name: ref.Name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("backup %s/%s: resource policy ConfigMap %s/%s not found; create it or fix spec.resourcePolicy.name", backup.Namespace, backup.Name, backup.Namespace, ref.Name)
		}
		return nil, fmt.Errorf("backup %s/%s: getting resource policy ConfigMap %s/%s: %w", backup.Namespace, backup.Name, backup.Namespace, ref.Name, err)
	}
	p, err := policy.FromConfigMap(cm)
	if err != nil {
		// Each problem already names the ConfigMap, the field and what is
		// allowed.
		return nil, fmt.Errorf("backup %s/%s: invalid resource policy:\n%w", backup.Namespace, backup.Name, err)
	}
	return p, nil
}

// PolicyKindWarning returns a warning when spec.resourcePolicy names a
// kind other than configmap, which Velero (and so Lifeboat) does not read:
// the backup runs without a policy. It returns "" otherwise.
func PolicyKindWarning(backup *v1.Backup) string {
	ref := backup.Spec.ResourcePolicy
	if ref == nil || strings.EqualFold(ref.Kind, "configmap") {
		return ""
	}
	return fmt.Sprintf("spec.resourcePolicy.kind %q is not configmap, so no resource policy is applied (Velero ignores it too); "+
		"set kind: configmap to apply the policy in ConfigMap %q", ref.Kind, ref.Name)
}

// defaultVolumesToFSBackup follows Velero's server: a true
// defaultVolumesToRestic (written by old clients) wins, otherwise
// defaultVolumesToFsBackup. The server's own default for an unset field is
// not known here; unset means false.
func defaultVolumesToFSBackup(spec *v1.BackupSpec) bool {
	if spec.DefaultVolumesToRestic != nil && *spec.DefaultVolumesToRestic {
		return true
	}
	return spec.DefaultVolumesToFsBackup != nil && *spec.DefaultVolumesToFsBackup
}

// backupNamespaces turns the namespace filters into what the pod index
// lists: the included names minus the excluded, or every namespace ("*")
// when the includes are empty, "*" or patterns, leaving out the excluded
// names. Pods of a namespace listed needlessly cost memory, never a wrong
// answer.
func backupNamespaces(spec *v1.BackupSpec) (namespaces, skip []string) {
	excluded := map[string]bool{}
	for _, ns := range spec.ExcludedNamespaces {
		excluded[ns] = true
	}
	all := len(spec.IncludedNamespaces) == 0
	for _, ns := range spec.IncludedNamespaces {
		if isPattern(ns) {
			all = true
		}
	}
	if all {
		for _, ns := range spec.ExcludedNamespaces {
			if !isPattern(ns) {
				skip = append(skip, ns)
			}
		}
		return []string{"*"}, skip
	}
	for _, ns := range spec.IncludedNamespaces {
		if !excluded[ns] {
			namespaces = append(namespaces, ns)
		}
	}
	return namespaces, nil
}

func isPattern(s string) bool { return strings.ContainsAny(s, "*?[") }

// excludesClaims reports whether the backup's resource filters leave out
// persistentvolumeclaims, which is what Velero's server passes as
// backupExcludePVC. (Velero's own plugin helper passes true whatever the
// filters say, which keeps every claim volume from fs-backup; this follows
// the server, whose meaning the parameter documents.) The scoped filters
// come from the spec, or from the policy's includeExcludePolicy when the
// spec leaves them empty.
func excludesClaims(spec *v1.BackupSpec, p *policy.Policies) bool {
	if filterExcludesClaims(spec.IncludedResources, spec.ExcludedResources) {
		return true
	}
	included, excluded := spec.IncludedNamespaceScopedResources, spec.ExcludedNamespaceScopedResources
	if p != nil && p.IncludeExcludePolicy != nil {
		if len(included) == 0 {
			included = p.IncludeExcludePolicy.IncludedNamespaceScopedResources
		}
		if len(excluded) == 0 {
			excluded = p.IncludeExcludePolicy.ExcludedNamespaceScopedResources
		}
	}
	return filterExcludesClaims(included, excluded)
}

// filterExcludesClaims applies one includes/excludes pair to the claims'
// resource: excludes win, empty includes take everything, and "*" in
// excludes is ignored as Velero ignores it.
func filterExcludesClaims(included, excluded []string) bool {
	for _, r := range excluded {
		if strings.TrimSpace(r) != "*" && namesClaims(r) {
			return true
		}
	}
	if len(included) == 0 {
		return false
	}
	for _, r := range included {
		if namesClaims(r) {
			return false
		}
	}
	return true
}

// namesClaims reports whether a filter entry names persistentvolumeclaims:
// by plural, singular or short name (what discovery resolves), or by a
// pattern that matches the plural.
func namesClaims(entry string) bool {
	e := strings.ToLower(strings.TrimSpace(entry))
	switch e {
	case "persistentvolumeclaims", "persistentvolumeclaim", "pvc":
		return true
	}
	if isPattern(e) {
		ok, err := path.Match(e, "persistentvolumeclaims")
		return err == nil && ok
	}
	return false
}
