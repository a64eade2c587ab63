package fleet

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Progress shows a run's events on w: on a terminal, one progress bar redrawn in place with a
// line for each wave, failure and pause; otherwise a line for every event, so that a log
// stays readable.
type Progress struct {
	w        io.Writer
	terminal bool
	drawn    time.Time
	finished int // resources that finished (moved, failed or gone) during the run
	first    time.Duration
}

// NewProgress returns a Progress writing to w; terminal picks the bar.
func NewProgress(w io.Writer, terminal bool) *Progress {
	return &Progress{w: w, terminal: terminal, first: -1}
}

// Event takes one event of a run (Options.Events).
func (p *Progress) Event(e Event) {
	switch e.Type {
	case ItemMigrated, ItemFailed, ItemGone:
		p.finished++
	case ItemRequested:
		if p.first < 0 {
			p.first = e.Elapsed
		}
	}
	line := p.line(e)
	if !p.terminal {
		if line != "" {
			fmt.Fprintf(p.w, "[%d/%d] %s\n", e.Counts.Done, e.Counts.Total, line)
		}
		return
	}
	important := e.Type == WaveStarted || e.Type == ItemFailed || e.Type == Paused || e.Type == Ended
	if !important && time.Since(p.drawn) < 100*time.Millisecond {
		return
	}
	fmt.Fprint(p.w, "\r\033[K")
	if important && line != "" {
		fmt.Fprintln(p.w, line)
	}
	fmt.Fprint(p.w, p.bar(e))
	if e.Type == Ended {
		fmt.Fprintln(p.w)
	}
	p.drawn = time.Now()
}

// line is the event in words, "" for one that says nothing on its own.
func (p *Progress) line(e Event) string {
	switch e.Type {
	case WaveStarted:
		return fmt.Sprintf("wave: %ss", e.Wave)
	case ItemRequested:
		return e.Item.String() + ": requested"
	case ItemProgress:
		return e.Item.String() + ": " + e.State
	case ItemMigrated:
		return fmt.Sprintf("%s: done in %s", e.Item, e.Took.Round(100*time.Millisecond))
	case ItemFailed:
		return fmt.Sprintf("%s: FAILED: %s", e.Item, e.Reason)
	case ItemGone:
		return e.Item.String() + ": deleted before it finished"
	case Paused:
		return fmt.Sprintf("paused: no new requests after %s failed; waiting for %d in flight", e.Item, e.Counts.InFlight)
	}
	return ""
}

// bar is the one-line summary: a bar of done, then counts, rate and time left.
func (p *Progress) bar(e Event) string {
	const width = 24
	c := e.Counts
	filled := 0
	if c.Total > 0 {
		filled = width * c.Done / c.Total
	}
	s := fmt.Sprintf("[%s%s] %d/%d done, %d in flight, %d waiting, %d failed",
		strings.Repeat("=", filled), strings.Repeat(" ", width-filled), c.Done, c.Total, c.InFlight, c.Waiting, c.Failed)
	if rate := p.rate(e.Elapsed); rate > 0 {
		left := time.Duration(float64(c.InFlight+c.Waiting) / rate * float64(time.Second))
		s += fmt.Sprintf(", %.1f/s, ETA %s", rate, left.Round(time.Second))
	}
	return s + fmt.Sprintf(" (%s)", e.Elapsed.Round(time.Second))
}

// rate is resources finished per second since the first request.
func (p *Progress) rate(elapsed time.Duration) float64 {
	if p.first < 0 || p.finished == 0 {
		return 0
	}
	secs := (elapsed - p.first).Seconds()
	if secs <= 0 {
		return 0
	}
	return float64(p.finished) / secs
}
