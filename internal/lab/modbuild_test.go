package lab

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testBuild is a moduleBuild whose "build" writes one file and counts its runs; fail makes
// it fail after writing.
func testBuild(runs *atomic.Int32, fail *atomic.Bool) moduleBuild {
	return moduleBuild{
		what: "the test program", version: "test-v1", goMod: []byte("module x\n"), goSum: nil, out: "bin",
		estimate: "this is quick",
		complete: func(dir string) error { return allExecutable(filepath.Join(dir, "prog")) },
		build: func(_ context.Context, src, scratch string, _ time.Time, _ io.Writer) error {
			runs.Add(1)
			if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond) // let concurrent callers pile up on the lock
			if err := os.WriteFile(filepath.Join(scratch, "prog"), []byte("#!/bin/sh\n"), 0o755); err != nil {
				return err
			}
			if fail.Load() {
				return errors.New("compiler exploded")
			}
			return nil
		},
	}
}

// Concurrent callers share one build; later calls use the cache; the cache key holds the
// version; a failed build names the program and leaves no partial result for the next call.
func TestModuleBuildOnceAndAtomic(t *testing.T) {
	t.Setenv("MACHINA_CACHE_DIR", t.TempDir())
	var runs atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	b := testBuild(&runs, &fail)
	if _, err := b.ensure(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "building the test program: compiler exploded") {
		t.Fatalf("failed build: %v, want an error naming the program and the cause", err)
	}
	cache, _ := CacheDir()
	if _, err := os.Stat(filepath.Join(cache, b.key(), "bin")); !os.IsNotExist(err) {
		t.Errorf("a failed build left its result in place (stat: %v)", err)
	}
	if !strings.HasPrefix(b.key(), "test-v1-") {
		t.Errorf("cache key %q does not start with the version", b.key())
	}

	fail.Store(false)
	runs.Store(0)
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	errs := make([]error, 4)
	for i := range dirs {
		wg.Go(func() { dirs[i], errs[i] = b.ensure(context.Background(), io.Discard) })
	}
	wg.Wait()
	for i := range dirs {
		if errs[i] != nil || dirs[i] != dirs[0] {
			t.Errorf("caller %d: %q, %v", i, dirs[i], errs[i])
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("%d builds for 4 concurrent callers, want 1", n)
	}
	if _, err := b.ensure(context.Background(), nil); err != nil || runs.Load() != 1 {
		t.Errorf("cached call: %v, builds %d, want no new build", err, runs.Load())
	}
}
