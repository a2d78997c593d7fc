package api

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultNamePrefix is given to a plugin name without a "/", as Velero does.
const DefaultNamePrefix = "velero.io/"

// NormalizeName returns the full name of a plugin: names without a "/" are
// Velero's own built-ins, written without their prefix.
func NormalizeName(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return DefaultNamePrefix + name
}

// ValidateName checks that name is "<DNS-1123 subdomain>/<name>", e.g.
// "example.io/annotate". The part before the slash says who wrote the
// plugin, so two vendors' plugins of the same short name never clash.
func ValidateName(name string) error {
	prefix, short, ok := strings.Cut(name, "/")
	if !ok || prefix == "" || short == "" {
		return fmt.Errorf("plugin name %q must be <DNS-1123 subdomain>/<name>, e.g. example.io/my-plugin", name)
	}
	if strings.Contains(short, "/") {
		return fmt.Errorf("plugin name %q must contain exactly one \"/\"", name)
	}
	if errs := validation.IsDNS1123Subdomain(prefix); len(errs) > 0 {
		return fmt.Errorf("plugin name %q: %q before the \"/\" is not a DNS-1123 subdomain: %s", name, prefix, strings.Join(errs, "; "))
	}
	if errs := validation.IsQualifiedName(name); len(errs) > 0 {
		return fmt.Errorf("plugin name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}
