package scaledown_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/machina-dev/machina/internal/controllers/internal/scaledown"
)

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// obj is a Machine stand-in created age minutes after base.
func obj(name string, minute int) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(base.Add(time.Duration(minute) * time.Minute))}}
}

func names(os []*corev1.Pod) string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.Name
	}
	return strings.Join(out, ",")
}

// rankBy ranks the named objects by the given ranks; any other object ranks 9.
func rankBy(ranks map[string]int) func(*corev1.Pod) int {
	return func(o *corev1.Pod) int {
		if r, ok := ranks[o.Name]; ok {
			return r
		}
		return 9
	}
}

func TestChooseOrders(t *testing.T) {
	a, b, c := obj("a", 1), obj("b", 2), obj("c", 3)
	sameTime1, sameTime2 := obj("x", 5), obj("y", 5)
	for _, tc := range []struct {
		name  string
		in    []*corev1.Pod
		n     int
		order scaledown.Order
		ranks map[string]int
		want  string
	}{
		{"newest first", []*corev1.Pod{a, c, b}, 2, scaledown.Newest, nil, "c,b"},
		{"oldest first", []*corev1.Pod{c, a, b}, 2, scaledown.Oldest, nil, "a,b"},
		{"newest, same time: higher name first", []*corev1.Pod{sameTime1, sameTime2}, 2, scaledown.Newest, nil, "y,x"},
		{"oldest, same time: lower name first", []*corev1.Pod{sameTime2, sameTime1}, 2, scaledown.Oldest, nil, "x,y"},
		{"rank before order", []*corev1.Pod{a, b, c}, 2, scaledown.Newest, map[string]int{"a": 0, "b": 1}, "a,b"},
		{"rank before order, oldest", []*corev1.Pod{a, b, c}, 1, scaledown.Oldest, map[string]int{"c": 0}, "c"},
		{"rank before random", []*corev1.Pod{a, b, c}, 1, scaledown.Random, map[string]int{"b": 0}, "b"},
		{"more asked than there are", []*corev1.Pod{b, a}, 5, scaledown.Oldest, nil, "a,b"},
		{"none asked", []*corev1.Pod{b, a}, 0, scaledown.Oldest, nil, ""},
		{"negative asked", []*corev1.Pod{b, a}, -1, scaledown.Oldest, nil, ""},
		{"nothing to choose from", nil, 2, scaledown.Newest, nil, ""},
	} {
		in := names(tc.in)
		if got := names(scaledown.Choose(tc.in, tc.n, tc.order, rankBy(tc.ranks))); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
		if after := names(tc.in); after != in {
			t.Errorf("%s: the input was reordered: %s, was %s", tc.name, after, in)
		}
	}
}

// Random (and any unknown order, such as the empty default) picks among equally ranked
// objects at random: over many draws every one is chosen, none much more often than the
// others.
func TestChooseRandom(t *testing.T) {
	const draws = 3000
	in := []*corev1.Pod{obj("a", 1), obj("b", 2), obj("c", 3)}
	for _, order := range []scaledown.Order{scaledown.Random, "", "Unknown"} {
		counts := map[string]int{}
		for range draws {
			counts[scaledown.Choose(in, 1, order, rankBy(nil))[0].Name]++
		}
		for _, name := range []string{"a", "b", "c"} {
			// Expected 1000 each (standard deviation 26); the bounds are over 7 deviations away.
			if n := counts[name]; n < 800 || n > 1200 {
				t.Errorf("order %q: %s chosen %d times of %d: %v", order, name, n, draws, counts)
			}
		}
	}
}
