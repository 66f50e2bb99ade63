package apicert

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RecheckInterval is how often a running operator looks at the Secret again: to renew the
// certificate in time, and to pick up a renewal another replica made.
const RecheckInterval = time.Hour

// maxAttempts bounds the get-and-write rounds of one Ensure: each lost race (another replica
// created or renewed the Secret first) takes one.
const maxAttempts = 5

// Issuer keeps the REST API's certificate in its Secret and serves the current one. It is a
// controller-runtime Runnable that runs on every replica, since every replica serves the API.
type Issuer struct {
	// Client reads and writes the Secret directly (the manager's cache does not hold it).
	Client client.Client
	// Secret names the Secret, in the operator's namespace.
	Secret types.NamespacedName
	// Hosts are the names the certificate must carry: the host of the URL agent pods dial.
	Hosts []string
	Log   *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	current  atomic.Pointer[tls.Certificate]
	caBundle atomic.Pointer[string]
}

// Ensure makes the Secret hold a CA and a certificate for Hosts with more than RenewBefore left,
// creating or renewing them as needed, and serves the Secret's certificate from then on. Replicas
// that race agree on whichever write lands first.
func (i *Issuer) Ensure(ctx context.Context) error {
	now := time.Now
	if i.Now != nil {
		now = i.Now
	}
	for range maxAttempts {
		var s corev1.Secret
		err := i.Client.Get(ctx, i.Secret, &s)
		if apierrors.IsNotFound(err) {
			data, _, _, err := refresh(nil, i.Hosts, now())
			if err != nil {
				return err
			}
			s = corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: i.Secret.Name, Namespace: i.Secret.Namespace, Labels: map[string]string{
					"app.kubernetes.io/name": "tatara-operator", "app.kubernetes.io/component": "api-tls",
					"app.kubernetes.io/managed-by": "tatara-operator",
				}},
				Type: corev1.SecretTypeTLS,
				Data: data,
			}
			switch err := i.Client.Create(ctx, &s); {
			case apierrors.IsAlreadyExists(err):
				continue
			case err != nil:
				return fmt.Errorf("failed to create the REST API's certificate Secret %s: %w", i.Secret, err)
			}
			i.log().Info("issued the REST API's CA and certificate", "secret", i.Secret.String(), "hosts", i.Hosts)
			return i.serve(s.Data)
		}
		if err != nil {
			return fmt.Errorf("failed to read the REST API's certificate Secret %s: %w", i.Secret, err)
		}
		data, changed, newCA, err := refresh(s.Data, i.Hosts, now())
		if err != nil {
			return err
		}
		if !changed {
			return i.serve(data)
		}
		s.Data = data
		switch err := i.Client.Update(ctx, &s); {
		case apierrors.IsConflict(err):
			continue
		case err != nil:
			return fmt.Errorf("failed to renew the REST API's certificate in Secret %s: %w", i.Secret, err)
		}
		if newCA {
			i.log().Warn("issued a new CA for the REST API: agent pods started before trust the former one and lose the operator",
				"secret", i.Secret.String())
		} else {
			i.log().Info("renewed the REST API's certificate", "secret", i.Secret.String(), "hosts", i.Hosts)
		}
		return i.serve(data)
	}
	return fmt.Errorf("failed to settle the REST API's certificate Secret %s: it changed under each of %d attempts", i.Secret, maxAttempts)
}

// serve makes data's certificate the one served and its CA the bundle given to new agent pods.
func (i *Issuer) serve(data map[string][]byte) error {
	kp, err := tls.X509KeyPair(data[CertKey], data[KeyKey])
	if err != nil {
		return fmt.Errorf("the REST API's certificate Secret %s holds no valid key pair: %w", i.Secret, err)
	}
	ca := string(data[CACertKey])
	i.current.Store(&kp)
	i.caBundle.Store(&ca)
	return nil
}

// GetCertificate is the server's tls.Config.GetCertificate.
func (i *Issuer) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := i.current.Load()
	if c == nil {
		return nil, fmt.Errorf("the REST API's certificate from Secret %s is not loaded yet", i.Secret)
	}
	return c, nil
}

// CABundle is the PEM of the CA, for TATARA_OPERATOR_CA_BUNDLE ("" before Ensure succeeded).
func (i *Issuer) CABundle() string {
	if ca := i.caBundle.Load(); ca != nil {
		return *ca
	}
	return ""
}

// Start re-runs Ensure every RecheckInterval until ctx ends. A failure is logged and tried again
// at the next round: the certificate in use stays valid for RenewBefore at least.
func (i *Issuer) Start(ctx context.Context) error {
	t := time.NewTicker(RecheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := i.Ensure(ctx); err != nil {
				i.log().Error("failed to check the REST API's certificate", "secret", i.Secret.String(), "error", err)
			}
		}
	}
}

// NeedLeaderElection is false: every replica serves the API, so every replica keeps its certificate.
func (i *Issuer) NeedLeaderElection() bool { return false }

func (i *Issuer) log() *slog.Logger {
	if i.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return i.Log
}
