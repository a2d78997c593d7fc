package repository

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The repositories' password, shared by all of them, where Velero keeps it.
const (
	PasswordSecretName = "velero-repo-credentials"
	PasswordSecretKey  = "repository-password"
	// DefaultPassword is what Velero puts in the Secret when it creates it;
	// using the same value lets either open the other's repositories
	// without configuration.
	DefaultPassword = "static-passw0rd"
)

const callTimeout = 30 * time.Second

// EnsurePasswordSecret creates the password Secret in namespace with
// Velero's default when it is missing, as Velero does; an existing one is
// left alone.
func EnsurePasswordSecret(ctx context.Context, c client.Client, namespace string) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var s corev1.Secret
	err := c.Get(cctx, client.ObjectKey{Namespace: namespace, Name: PasswordSecretName}, &s)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading secret %s/%s: %w", namespace, PasswordSecretName, err)
	}
	s = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: PasswordSecretName},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{PasswordSecretKey: []byte(DefaultPassword)},
	}
	if err := c.Create(cctx, &s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating secret %s/%s with the default repository password: %w", namespace, PasswordSecretName, err)
	}
	return nil
}

// readPassword reads the password, trimmed of surrounding space as Velero
// reads it.
func readPassword(ctx context.Context, c client.Reader, namespace string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var s corev1.Secret
	err := c.Get(cctx, client.ObjectKey{Namespace: namespace, Name: PasswordSecretName}, &s)
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("secret %s/%s, holding the file-system backup repositories' password, does not exist; the server creates it with the default password, or create it with key %q", namespace, PasswordSecretName, PasswordSecretKey)
	}
	if err != nil {
		return "", fmt.Errorf("reading secret %s/%s: %w", namespace, PasswordSecretName, err)
	}
	v, ok := s.Data[PasswordSecretKey]
	if !ok {
		return "", fmt.Errorf("secret %s/%s has no key %q (the repositories' password)", namespace, PasswordSecretName, PasswordSecretKey)
	}
	return strings.TrimSpace(string(v)), nil
}
