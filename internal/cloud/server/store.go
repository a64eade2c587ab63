package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// The state file is a bbolt database. Its "meta" bucket carries a format marker and a
// version; a file without them is somebody else's and is never written to.
const (
	stateFileName = "cloud.db"
	formatMarker  = "machina-simulated-cloud"
	formatVersion = "1"
)

var (
	bucketMeta       = []byte("meta")
	bucketInstances  = []byte("instances")
	bucketTokens     = []byte("tokens")
	bucketTombstones = []byte("tombstones")
	bucketNetworks   = []byte("networks")
	bucketGroups     = []byte("groups")
	bucketFaults     = []byte("faults")
	bucketCounters   = []byte("counters")

	allBuckets = [][]byte{bucketInstances, bucketTokens, bucketTombstones, bucketNetworks,
		bucketGroups, bucketFaults, bucketCounters}
)

// instance is the persisted record of an instance. Its state is not stored: it follows
// from the timestamps and the current time (see stateAt), so no goroutine drives it.
type instance struct {
	ID           string            `json:"id"`
	Region       string            `json:"region"`
	Zone         string            `json:"zone"`
	InstanceType string            `json:"instanceType"`
	Image        string            `json:"image"`
	Architecture string            `json:"architecture"`
	PrivateIP    string            `json:"privateIP"`
	Hostname     string            `json:"hostname"`
	NetworkID    string            `json:"networkID,omitempty"`
	GroupID      string            `json:"groupID,omitempty"`
	Health       string            `json:"health,omitempty"`
	LTVersion    int               `json:"ltVersion,omitempty"`
	Token        string            `json:"token,omitempty"`
	RequestHash  string            `json:"requestHash,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
	UserData     []byte            `json:"userData,omitempty"`
	StateReason  string            `json:"stateReason,omitempty"`

	LaunchTime time.Time `json:"launchTime"`
	RunningAt  time.Time `json:"runningAt"`
	// ShutdownAt is when termination was requested; TerminatedAt when it completes.
	ShutdownAt   time.Time `json:"shutdownAt,omitzero"`
	TerminatedAt time.Time `json:"terminatedAt,omitzero"`
	// StopAt is when a stop was requested (EC2 StopInstances), StoppedAt when it
	// completes; both are cleared by a start, which moves LaunchTime and RunningAt.
	StopAt    time.Time `json:"stopAt,omitzero"`
	StoppedAt time.Time `json:"stoppedAt,omitzero"`
	// EC2 is set for instances launched through the EC2 front.
	EC2 *api.EC2Attributes `json:"ec2,omitempty"`
}

// stateAt computes the state at now and when that state began.
func (i *instance) stateAt(now time.Time) (api.InstanceState, time.Time) {
	switch {
	case !i.TerminatedAt.IsZero() && !now.Before(i.TerminatedAt):
		return api.StateTerminated, i.TerminatedAt
	case !i.ShutdownAt.IsZero():
		return api.StateShuttingDown, i.ShutdownAt
	case !i.StoppedAt.IsZero() && !now.Before(i.StoppedAt):
		return api.StateStopped, i.StoppedAt
	case !i.StopAt.IsZero():
		return api.StateStopping, i.StopAt
	case !now.Before(i.RunningAt):
		return api.StateRunning, i.RunningAt
	}
	return api.StatePending, i.LaunchTime
}

func (i *instance) view(now time.Time, userData bool) api.Instance {
	st, since := i.stateAt(now)
	out := api.Instance{
		InstanceID:          i.ID,
		ProviderID:          api.FormatProviderID(i.Region, i.Zone, i.ID),
		Region:              i.Region,
		Zone:                i.Zone,
		InstanceType:        i.InstanceType,
		Image:               i.Image,
		Architecture:        i.Architecture,
		State:               st,
		StateTransitionTime: since,
		LaunchTime:          i.LaunchTime,
		PrivateIP:           i.PrivateIP,
		Hostname:            i.Hostname,
		NetworkID:           i.NetworkID,
		ScalingGroupID:      i.GroupID,
		Health:              i.Health,
		ClientToken:         i.Token,
		Tags:                copyTags(i.Tags),
	}
	if st != api.StatePending && st != api.StateRunning {
		out.StateReason = i.StateReason
	}
	if userData {
		out.UserData = append([]byte(nil), i.UserData...)
	}
	if i.EC2 != nil {
		out.ProviderID = api.FormatAWSProviderID(i.Zone, i.ID)
		out.EC2 = cloneEC2(i.EC2)
	}
	return out
}

// tokenRecord maps a client token to the instance it created.
type tokenRecord struct {
	InstanceID  string `json:"instanceID"`
	RequestHash string `json:"requestHash"`
}

type network struct {
	api.Network
	RequestHash string `json:"requestHash"`
}

type group struct {
	api.ScalingGroup
	RequestHash string `json:"requestHash"`
}

// openStore opens (creating if absent) the state file in dir. An existing file must be a
// machina cloud state file of a known version; anything else is refused untouched.
func openStore(dir string, noSync bool) (*bolt.DB, error) {
	if dir == "" {
		return nil, errors.New("cloud state directory is required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating cloud state directory: %w", err)
	}
	path := filepath.Join(dir, stateFileName)
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("cloud state file %s is a directory", path)
	case err == nil && fi.Size() > 0:
		// Validate read-only first so that a foreign file is never opened for writing.
		if err := checkStateFile(path); err != nil {
			return nil, err
		}
	case err != nil && !os.IsNotExist(err):
		return nil, fmt.Errorf("cloud state file: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoSync: noSync})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("cloud state file %s is locked by another process (is another machina cloud running on this state directory?)", path)
		}
		return nil, fmt.Errorf("opening cloud state file %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			// Only a new, empty database reaches here (checkStateFile refuses others).
			if len(bucketNames(tx)) != 0 {
				return fmt.Errorf("cloud state file %s has no machina format marker", path)
			}
			m, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			if err := m.Put([]byte("format"), []byte(formatMarker)); err != nil {
				return err
			}
			if err := m.Put([]byte("version"), []byte(formatVersion)); err != nil {
				return err
			}
		}
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// checkStateFile opens path read-only and verifies the format marker and version.
func checkStateFile(path string) (err error) {
	refuse := func(why string, args ...any) error {
		return fmt.Errorf("cloud state file %s is not usable: %s; it was left untouched (move it away or choose another --state-dir)",
			path, fmt.Sprintf(why, args...))
	}
	defer func() {
		// bbolt may panic on pages it cannot decode.
		if r := recover(); r != nil {
			err = refuse("corrupt database (%v)", r)
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return fmt.Errorf("cloud state file %s is locked by another process (is another machina cloud running on this state directory?)", path)
		}
		return refuse("not a bbolt database or corrupt (%v)", err)
	}
	defer func() { _ = db.Close() }()
	return db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return refuse("no machina format marker (buckets %v)", bucketNames(tx))
		}
		if f := string(meta.Get([]byte("format"))); f != formatMarker {
			return refuse("format marker is %q, want %q", f, formatMarker)
		}
		if v := string(meta.Get([]byte("version"))); v != formatVersion {
			return refuse("format version %q is not supported (this machina reads version %s)", v, formatVersion)
		}
		var first error
		for err := range tx.Check() { // drain: Check's goroutine sends every error
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return refuse("corrupt database (%v)", first)
		}
		return nil
	})
}

func bucketNames(tx *bolt.Tx) []string {
	var names []string
	_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		names = append(names, string(name))
		return nil
	})
	return names
}

func putJSON(tx *bolt.Tx, bucket []byte, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Bucket(bucket).Put([]byte(key), b)
}

func deleteKey(tx *bolt.Tx, bucket []byte, key string) error {
	return tx.Bucket(bucket).Delete([]byte(key))
}

// loadAll decodes every value of a bucket with fn.
func loadAll(tx *bolt.Tx, bucket []byte, fn func(k, v []byte) error) error {
	return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
		if err := fn(k, v); err != nil {
			return fmt.Errorf("decoding %s/%s: %w", bucket, k, err)
		}
		return nil
	})
}
