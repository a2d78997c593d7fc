package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// LoadPolicy reads the resource policy spec.resourcePolicy names, nil when
// there is none. As in Velero, a restore takes only a ConfigMap, and only
// its fine-grained filters (policy.RestoreProblems): anything else is an
// error, which fails the restore's validation.
func LoadPolicy(ctx context.Context, c crclient.Reader, rs *v1.Restore) (*policy.Policies, error) {
	ref := rs.Spec.ResourcePolicy
	if ref == nil {
		return nil, nil
	}
	if !strings.EqualFold(ref.Kind, "configmap") {
		return nil, fmt.Errorf("spec.resourcePolicy.kind %q is not supported; set kind: configmap and name the ConfigMap holding the policy", ref.Kind)
	}
	if ref.Name == "" {
		return nil, errors.New("spec.resourcePolicy.name is empty; name the ConfigMap holding the resource policy")
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cm := &corev1.ConfigMap{}
	if err := c.Get(cctx, crclient.ObjectKey{Namespace: rs.Namespace, Name: ref.Name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("spec.resourcePolicy: ConfigMap %s/%s not found; create it or fix spec.resourcePolicy.name", rs.Namespace, ref.Name)
		}
		return nil, fmt.Errorf("spec.resourcePolicy: getting ConfigMap %s/%s: %w", rs.Namespace, ref.Name, err)
	}
	p, err := policy.FromConfigMap(cm)
	if err != nil {
		return nil, fmt.Errorf("spec.resourcePolicy: %w", err)
	}
	if problems := p.RestoreProblems(); len(problems) > 0 {
		for i, m := range problems {
			problems[i] = fmt.Sprintf("spec.resourcePolicy: ConfigMap %s/%s: %s", rs.Namespace, ref.Name, m)
		}
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return p, nil
}

// ValidatePolicy returns the problems with the restore's resource policy,
// one message each, for the restore's validation errors.
func ValidatePolicy(ctx context.Context, c crclient.Reader, rs *v1.Restore) []string {
	_, err := LoadPolicy(ctx, c, rs)
	if err == nil {
		return nil
	}
	var verr *policy.ValidationError
	if errors.As(err, &verr) {
		msgs := verr.Messages()
		for i, m := range msgs {
			msgs[i] = "spec.resourcePolicy: " + m
		}
		return msgs
	}
	return strings.Split(err.Error(), "\n")
}
