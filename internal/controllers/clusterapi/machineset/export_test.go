package machineset

import "time"

// SetResumeGrace sets how old a Machine of a former template must be before finishCreations
// replaces it (30 s otherwise, which a test would have to sit out). Call it before the
// manager starts: the controllers read it unguarded.
func SetResumeGrace(d time.Duration) { resumeGrace = d }
