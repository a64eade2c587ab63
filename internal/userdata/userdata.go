// Package userdata gives a Machine's user data to the Cluster API side: the Secret the
// Machine API names in a providerSpec (key userData) becomes the bootstrap data Secret the
// Cluster API bootstrap contract asks for. The sync writes it for every Cluster API copy it
// makes; tests that stand in for OpenShift's installer write it the same way.
package userdata

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Ensure copies the Machine API user-data Secret name (key userData) from srcNS into
// dstNS as a Cluster API bootstrap data Secret (key value, cluster-name label), which is what
// Cluster API providers read. Ignition user data (what OpenShift stores) is marked so (key
// format, "ignition"), as the bootstrap contract asks; a format already there is kept. A
// missing source Secret is not an error: the Machine waits.
func Ensure(ctx context.Context, c client.Client, srcNS, dstNS string, name *string, clusterName string) error {
	if name == nil || *name == "" {
		return nil
	}
	src := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: srcNS, Name: *name}, src); err != nil {
		return client.IgnoreNotFound(err)
	}
	dst := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dstNS, Name: *name}}
	_, err := controllerutil.CreateOrPatch(ctx, c, dst, func() error {
		if dst.Data == nil {
			dst.Data = map[string][]byte{}
		}
		dst.Data["value"] = src.Data["userData"]
		if _, set := dst.Data["format"]; !set && isIgnition(src.Data["userData"]) {
			dst.Data["format"] = []byte(IgnitionFormat)
		}
		if dst.Labels == nil {
			dst.Labels = map[string]string{}
		}
		dst.Labels[clusterv1.ClusterNameLabel] = clusterName
		return nil
	})
	if apierrors.IsAlreadyExists(err) {
		// Another worker (a MachineSet of the same cluster) created it from the same source
		// since this one's cache was filled: nothing is left to do.
		return nil
	}
	return err
}

// IgnitionFormat is the bootstrap data Secret's format for an Ignition config.
const IgnitionFormat = "ignition"

// isIgnition reports user data that is an Ignition config: a JSON object with an "ignition"
// object (which carries its version).
func isIgnition(data []byte) bool {
	var cfg struct {
		Ignition *struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	return json.Unmarshal(data, &cfg) == nil && cfg.Ignition != nil
}
