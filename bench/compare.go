package main

import (
	"fmt"
	"os"
)

// compareSides are the scenarios compare runs twice, and how it sets each side: machina's
// controllers first, then the peer users would otherwise run.
var compareSides = map[string]func(peer bool){
	"mapi-scale": func(peer bool) {
		machineAPI, auditWrites = "machina", true
		if peer {
			machineAPI = "upstream"
		}
	},
	"capi-scale": func(peer bool) {
		core = "machina"
		if peer {
			core = "upstream"
		}
	},
}

// compare runs scenario at each size under machina's controllers and then under the peer's,
// on the same box in one sitting, and prints both tables and the ratios peer/machina.
func compare(scenario string, sizes intList) int {
	rows, err := compareRuns(scenario, sizes)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench compare %s: %v\n", scenario, err)
		return 1
	}
	printTable(scenario+", machina", rows[0])
	printTable(scenario+", the peer (-machine-api upstream / -core upstream)", rows[1])
	fmt.Printf("\n%s: the peer's figures over machina's (above 1: machina is ahead)\n", scenario)
	fmt.Printf("%8s %10s %14s %18s\n", "N", "seconds", "writes/M", "apiserver CPU-s")
	for i, m := range rows[0] {
		p := rows[1][i]
		fmt.Printf("%8d %10s %14s %18s\n", m.N, ratio(p.Seconds, m.Seconds),
			ratio(float64(p.ManagerWrites+p.OtherWrites), float64(m.ManagerWrites+m.OtherWrites)), ratio(p.APIServerCPU, m.APIServerCPU))
	}
	return 0
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// compareRuns runs scenario at each size with machina's controllers (rows[0]) and the
// peer's (rows[1]), alternating, and leaves the flags as it found them.
func compareRuns(scenario string, sizes intList) (rows [2][]result, err error) {
	set := compareSides[scenario]
	savedAPI, savedCore, savedAudit := machineAPI, core, auditWrites
	defer func() { machineAPI, core, auditWrites = savedAPI, savedCore, savedAudit }()
	for _, n := range sizes {
		for side, peer := range []bool{false, true} {
			set(peer)
			r, err := scenarios[scenario](n)
			if err != nil {
				return rows, fmt.Errorf("-n %d (peer %v): %w", n, peer, err)
			}
			rows[side] = append(rows[side], r)
		}
	}
	return rows, nil
}
