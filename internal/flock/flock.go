// Package flock takes advisory, exclusive file locks (flock(2)), released by the kernel when
// the process dies, so a crashed holder never leaves a stale lock behind.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// ErrLocked means another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// TryLock takes the lock on path or returns ErrLocked at once.
func TryLock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// Lock waits for the lock on path until ctx ends, calling onWait once if it has to wait.
func Lock(ctx context.Context, path string, onWait func()) (unlock func(), err error) {
	waited := false
	for {
		unlock, err := TryLock(path)
		if !errors.Is(err, ErrLocked) {
			return unlock, err
		}
		if !waited && onWait != nil {
			onWait()
		}
		waited = true
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
