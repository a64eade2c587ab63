package lab

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// auditPolicy records every mutating request at level Metadata, once, when its response is
// complete: no request or response bodies, no reads, no watch streams. Leases are included
// (a soak reads the renewals of its leaders from the log).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// auditArgs writes the audit policy into the lab directory and returns kube-apiserver's audit
// flags. The log backend runs in blocking mode: each event is one small write(2) of a line
// in the request's own goroutine after the response, so an event is in the file about when
// its client has the answer and none is ever dropped (batch mode drops events when its
// buffer is full and holds them back up to its wait time); at Metadata level for writes only,
// that costs a few microseconds per write. The log is never rotated or compressed
// (maxsize 100 GiB): a 30-minute soak's log stays one file.
func (l *Lab) auditArgs() ([]string, error) {
	policy := filepath.Join(l.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("lab: writing the audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + l.auditLog,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=102400",
		"--audit-log-maxbackup=0",
		"--audit-log-maxage=0",
		"--audit-log-compress=false",
	}, nil
}

// AuditLogPath returns the kube-apiserver's audit log, <Dir>/logs/audit.log, or "" when the
// lab was started without Options.AuditLog.
func (l *Lab) AuditLogPath() string { return l.auditLog }

// AuditEvent is one request of the audit log.
type AuditEvent struct {
	Verb        string
	User        string   // user.username
	Groups      []string // user.groups
	Resource    string
	Subresource string
	Namespace   string
	Name        string // empty for a create by generateName and for deletecollection
	APIGroup    string // "" for the core group
	Code        int    // the response's HTTP status
	Received    time.Time
	Completed   time.Time // when the response was complete (the stage's timestamp)
}

// auditLine is the part of an audit.k8s.io/v1 Event that AuditEvent keeps.
type auditLine struct {
	Verb string `json:"verb"`
	User struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	Completed time.Time `json:"stageTimestamp"`
}

// ReadAudit reads an audit log written in JSON lines. A last line without its newline may be
// half-written (kube-apiserver is appending to the file): it is returned if it parses and
// skipped otherwise. Any other line that does not parse is an error.
func ReadAudit(path string) ([]AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var events []AuditEvent
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		complete := err == nil
		if err != nil && !errors.Is(err, io.EOF) {
			return events, fmt.Errorf("reading the audit log %s: %w", path, err)
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			ev, perr := parseAuditLine(line)
			if perr == nil {
				events = append(events, ev)
			} else if complete {
				return events, fmt.Errorf("audit log %s line %d: %w", path, n, perr)
			}
		}
		if !complete {
			return events, nil
		}
	}
}

func parseAuditLine(line []byte) (AuditEvent, error) {
	var a auditLine
	if err := json.Unmarshal(line, &a); err != nil {
		return AuditEvent{}, err
	}
	ev := AuditEvent{Verb: a.Verb, User: a.User.Username, Groups: a.User.Groups, Received: a.Received, Completed: a.Completed}
	if o := a.ObjectRef; o != nil {
		ev.Resource, ev.Subresource, ev.Namespace, ev.Name, ev.APIGroup = o.Resource, o.Subresource, o.Namespace, o.Name, o.APIGroup
	}
	if a.ResponseStatus != nil {
		ev.Code = a.ResponseStatus.Code
	}
	return ev, nil
}
