module sigs.k8s.io/cluster-api/errors

go 1.26.0
