//go:build tools

// Package tools records the commands the local lab builds, so `go mod tidy` keeps their
// dependencies in go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
