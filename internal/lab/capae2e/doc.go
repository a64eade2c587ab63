// Package capae2e holds the end-to-end test of the upstream Cluster API Provider AWS
// controller in the lab: machina's Cluster API controllers, CAPA and the simulated cloud's
// EC2 front together (see lab.StartCAPA). It has no code of its own.
package capae2e
