package testenv

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// Main is the TestMain of a package whose parallel lab tests wait far more than they compute
// (controllers requeueing, instances booting, handovers held at a step): it runs up to
// parallel of them at a time instead of GOMAXPROCS, unless -test.parallel is given. The
// migration package's labs left a 2-core machine a quarter idle at two at a time.
func Main(m *testing.M, parallel int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(parallel)); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
