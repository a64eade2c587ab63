// Package scaledown picks the Machines a MachineSet deletes when it has too many, for both
// APIs' MachineSet controllers: each API says which Machines should go first (its rank) and
// how Machines that rank alike are ordered (the Machine API's spec.deletePolicy, the Cluster
// API's spec.deletion.order; both use the values of Order).
package scaledown

import (
	"cmp"
	"math/rand/v2"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Order is how Machines of the same rank are ordered for deletion.
type Order string

// The orders both APIs know; any other value (the empty default) means Random.
const (
	// Random deletes Machines of the same rank in a random order.
	Random Order = "Random"
	// Newest deletes the most recently created first, the name breaking ties (higher first).
	Newest Order = "Newest"
	// Oldest deletes the least recently created first, the name breaking ties (lower first).
	Oldest Order = "Oldest"
)

type candidate[M client.Object] struct {
	m    M
	rank int
	coin float64 // the Random order's draw
}

// Choose returns the n Machines of machines to delete (all of them when there are fewer):
// lower rank first, then by order. machines is not modified.
func Choose[M client.Object](machines []M, n int, order Order, rank func(M) int) []M {
	cs := make([]candidate[M], len(machines))
	for i, m := range machines {
		cs[i] = candidate[M]{m: m, rank: rank(m), coin: rand.Float64()}
	}
	slices.SortStableFunc(cs, func(a, b candidate[M]) int {
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return compareInOrder(a.m, b.m, a.coin, b.coin, order)
	})
	n = max(0, min(n, len(cs)))
	out := make([]M, n)
	for i := range out {
		out[i] = cs[i].m
	}
	return out
}

// compareInOrder compares two Machines of the same rank: negative when a goes first.
func compareInOrder(a, b client.Object, coinA, coinB float64, order Order) int {
	ta, tb := a.GetCreationTimestamp().Time, b.GetCreationTimestamp().Time
	switch order {
	case Newest:
		if c := tb.Compare(ta); c != 0 {
			return c
		}
		return cmp.Compare(b.GetName(), a.GetName())
	case Oldest:
		if c := ta.Compare(tb); c != 0 {
			return c
		}
		return cmp.Compare(a.GetName(), b.GetName())
	default:
		return cmp.Compare(coinA, coinB)
	}
}
