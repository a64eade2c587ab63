package ec2

import (
	"maps"
	"sync"
)

// RejectedCall is the key under which Calls counts requests refused before an action ran:
// an unknown path, a bad signature or credential, a malformed form, a missing Action or a
// wrong Version.
const RejectedCall = "(rejected)"

// callCounter counts the requests the front answered, by action. It is in memory only and
// starts from zero with every Front.
type callCounter struct {
	mu       sync.Mutex
	byAction map[string]int64
}

func (c *callCounter) add(action string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byAction == nil {
		c.byAction = map[string]int64{}
	}
	c.byAction[action]++
}

// Calls returns how many requests the front has answered since it was created, by action
// (of every service on its port: EC2, STS, ELB), failed ones included; requests refused
// before an action ran count under RejectedCall. Health checks are not counted. Benchmarks
// read it to report EC2 calls per Machine.
func (f *Front) Calls() map[string]int64 {
	f.calls.mu.Lock()
	defer f.calls.mu.Unlock()
	return maps.Clone(f.calls.byAction)
}

// TotalCalls sums counts such as Calls returns.
func TotalCalls(counts map[string]int64) int64 {
	var n int64
	for _, v := range counts {
		n += v
	}
	return n
}
