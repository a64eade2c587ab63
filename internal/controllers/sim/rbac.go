package sim

// The rights the simulated provider grants to the provider-agnostic controllers (Cluster API
// core, sync, migration) on its kinds, as the infrastructure provider contract asks: they go
// into the provider's ClusterRole (config/rbac/sim, generated from the markers in this
// package tree), which carries cluster.x-k8s.io/aggregate-to-manager: "true" and is thereby
// aggregated into machina-manager-infrastructure. The core role names no provider's kinds.
//
// Cluster API core: the Cluster, Machine, MachineSet, MachinePool and MachineHealthCheck
// controllers read, own (owner references, labels), create from templates and delete the
// InfraCluster, InfraMachines, InfraMachineTemplates and InfraMachinePools.
// Sync and migration: create and update the converted copies and hand their paused state over.
//
// +kubebuilder:rbac:groups=infrastructure.machina.dev,resources=simclusters;simmachines;simmachinetemplates;simmachinepools,verbs=get;list;watch;create;update;patch;delete
