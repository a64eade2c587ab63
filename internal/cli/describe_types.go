package cli

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

type metav1OwnerReference = metav1.OwnerReference
