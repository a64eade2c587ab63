package main

import (
	"cmp"
	"context"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/authority"
)

// soakOp is one kind of random operation; weight is its share of the draws.
type soakOp struct {
	name   string
	weight int
	do     func(s *soak, ctx context.Context) error
}

var soakOps = []soakOp{
	{"scale-user", 6, (*soak).scaleUser},
	{"scale-autoscaler", 4, (*soak).scaleAutoscaler},
	{"delete-machine", 4, (*soak).deleteMachine},
	{"migrate-machineset", 2, (*soak).migrateMachineSet},
	{"migrate-machine", 3, (*soak).migrateMachine},
	{"migrate-and-roll-back", 3, (*soak).migrateAndRollBack},
	{"migrate-mhc", 1, (*soak).migrateMHC},
}

// randomOp draws and runs one operation; a refusal (admission, conflict, webhook down while
// the manager restarts) is counted, not fatal: the soak checks the controllers, not the ops.
func (s *soak) randomOp(ctx context.Context) {
	total := 0
	for _, op := range soakOps {
		total += op.weight
	}
	n := s.rnd.IntN(total)
	for _, op := range soakOps {
		if n -= op.weight; n >= 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s.target = ""
		err := op.do(s, ctx)
		cancel()
		s.rep.op(op.name, err)
		if err != nil {
			s.check.note("op %s %s: refused: %v", op.name, s.target, err)
		} else {
			s.check.note("op %s %s", op.name, s.target)
		}
		return
	}
}

func (s *soak) pick(names []string) string { return names[s.rnd.IntN(len(names))] }

// replicasBudget is how many replicas set may have so the sum stays within -machines.
func (s *soak) replicasBudget(ctx context.Context, set string) (int, error) {
	var list machinev1beta1.MachineSetList
	if err := s.e.client.List(ctx, &list, client.InNamespace(mapiNS)); err != nil {
		return 0, err
	}
	left := s.o.Machines
	for _, ms := range list.Items {
		if ms.Name != set {
			left -= int(ptr.Deref(ms.Spec.Replicas, 0))
		}
	}
	return max(0, min(left, 2*s.o.Machines/s.o.Sets)), nil
}

// scaleUser scales a MachineSet through the scale subresource as an administrator, mostly
// on its authoritative side (the other side is refused by admission, which is counted).
func (s *soak) scaleUser(ctx context.Context) error {
	set := s.pick(s.sets)
	budget, err := s.replicasBudget(ctx, set)
	if err != nil {
		return err
	}
	ms := &machinev1beta1.MachineSet{}
	if err := s.e.client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: set}, ms); err != nil {
		return err
	}
	useCAPI := ms.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI
	if s.rnd.IntN(5) == 0 {
		useCAPI = !useCAPI
	}
	replicas := int32(s.rnd.IntN(budget + 1))
	s.target = fmt.Sprintf("MachineSet %s (authority %s, Cluster API side %v) to %d", set, ms.Status.AuthoritativeAPI, useCAPI, replicas)
	if useCAPI {
		obj := &clusterv1.MachineSet{}
		obj.Namespace, obj.Name = capiNS, set
		return s.user.SubResource("scale").Update(ctx, obj, scaleBody(capiNS, set, replicas))
	}
	obj := &machinev1beta1.MachineSet{}
	obj.Namespace, obj.Name = mapiNS, set
	return s.user.SubResource("scale").Update(ctx, obj, scaleBody(mapiNS, set, replicas))
}

// scaleAutoscaler scales the Cluster API MachineSet as the cluster autoscaler does, whatever
// the authority (a paused mirror's replicas are carried to the Machine API).
func (s *soak) scaleAutoscaler(ctx context.Context) error {
	set := s.pick(s.sets)
	budget, err := s.replicasBudget(ctx, set)
	if err != nil {
		return err
	}
	obj := &clusterv1.MachineSet{}
	obj.Namespace, obj.Name = capiNS, set
	replicas := int32(s.rnd.IntN(budget + 1))
	s.target = fmt.Sprintf("Cluster API MachineSet %s to %d", set, replicas)
	return s.autoscaler.SubResource("scale").Update(ctx, obj, scaleBody(capiNS, set, replicas),
		client.FieldOwner(soakAutoscalerManager))
}

// deleteMachine deletes a random Machine of either API as the administrator.
func (s *soak) deleteMachine(ctx context.Context) error {
	if s.rnd.IntN(2) == 0 {
		var list machinev1beta1.MachineList
		if err := s.e.client.List(ctx, &list, client.InNamespace(mapiNS)); err != nil || len(list.Items) == 0 {
			return err
		}
		m := list.Items[s.rnd.IntN(len(list.Items))]
		s.target = fmt.Sprintf("Machine API Machine %s (authority %s)", m.Name, m.Status.AuthoritativeAPI)
		return s.user.Delete(ctx, &m)
	}
	var list clusterv1.MachineList
	if err := s.e.client.List(ctx, &list, client.InNamespace(capiNS)); err != nil || len(list.Items) == 0 {
		return err
	}
	m := list.Items[s.rnd.IntN(len(list.Items))]
	s.target = fmt.Sprintf("Cluster API Machine %s (paused %v)", m.Name, capiPaused(&m))
	return s.user.Delete(ctx, &m)
}

// otherAPI is the authority a request flips to: away from the current one, or back to where
// a migration under way started (a rollback).
func otherAPI(status, synced machinev1beta1.MachineAuthority) machinev1beta1.MachineAuthority {
	if status == machinev1beta1.MachineAuthorityMigrating {
		status = synced
	}
	if status == machinev1beta1.MachineAuthorityClusterAPI {
		return machinev1beta1.MachineAuthorityMachineAPI
	}
	return machinev1beta1.MachineAuthorityClusterAPI
}

// flipSpec sets spec.authoritativeAPI of o (a Machine API Machine or MachineSet) to the other
// API and returns the authority it moves away from.
func (s *soak) flipSpec(ctx context.Context, o client.Object) (machinev1beta1.MachineAuthority, error) {
	return s.requestAuthority(ctx, o, "")
}

// requestAuthority sets spec.authoritativeAPI of o to to (the other API when empty) and
// returns the authority o had (its status, or where a handover under way started).
func (s *soak) requestAuthority(ctx context.Context, o client.Object, to machinev1beta1.MachineAuthority) (machinev1beta1.MachineAuthority, error) {
	if err := s.e.client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return "", err
	}
	patch := client.MergeFromWithOptions(o.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	var from machinev1beta1.MachineAuthority
	switch t := o.(type) {
	case *machinev1beta1.Machine:
		from = settledAuthority(t.Status.AuthoritativeAPI, machinev1beta1.MachineAuthority(t.Status.SynchronizedAPI))
		t.Spec.AuthoritativeAPI = cmp.Or(to, otherAPI(t.Status.AuthoritativeAPI, machinev1beta1.MachineAuthority(t.Status.SynchronizedAPI)))
		s.target += fmt.Sprintf(" Machine %s (status %s) to %s;", t.Name, t.Status.AuthoritativeAPI, t.Spec.AuthoritativeAPI)
	case *machinev1beta1.MachineSet:
		from = settledAuthority(t.Status.AuthoritativeAPI, machinev1beta1.MachineAuthority(t.Status.SynchronizedAPI))
		t.Spec.AuthoritativeAPI = cmp.Or(to, otherAPI(t.Status.AuthoritativeAPI, machinev1beta1.MachineAuthority(t.Status.SynchronizedAPI)))
		s.target += fmt.Sprintf(" MachineSet %s (status %s) to %s;", t.Name, t.Status.AuthoritativeAPI, t.Spec.AuthoritativeAPI)
	}
	return from, s.user.Patch(ctx, o, patch)
}

// settledAuthority is the side a resource was on before any handover under way.
func settledAuthority(status, synchronized machinev1beta1.MachineAuthority) machinev1beta1.MachineAuthority {
	if status == machinev1beta1.MachineAuthorityMigrating {
		return synchronized
	}
	return status
}

func (s *soak) randomMachine(ctx context.Context) (*machinev1beta1.Machine, error) {
	var list machinev1beta1.MachineList
	if err := s.e.client.List(ctx, &list, client.InNamespace(mapiNS)); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[s.rnd.IntN(len(list.Items))], nil
}

func (s *soak) migrateMachineSet(ctx context.Context) error {
	ms := &machinev1beta1.MachineSet{}
	ms.Namespace, ms.Name = mapiNS, s.pick(s.sets)
	_, err := s.flipSpec(ctx, ms)
	return err
}

func (s *soak) migrateMachine(ctx context.Context) error {
	m, err := s.randomMachine(ctx)
	if m == nil {
		return err
	}
	_, err = s.flipSpec(ctx, m)
	return err
}

// migrateAndRollBack asks for a migration of a Machine or MachineSet and, after a random
// 0.2–4 s, flips the request back (a rollback if the handover is under way by then).
func (s *soak) migrateAndRollBack(ctx context.Context) error {
	var o client.Object
	if s.rnd.IntN(2) == 0 {
		m, err := s.randomMachine(ctx)
		if m == nil {
			return err
		}
		o = m
	} else {
		ms := &machinev1beta1.MachineSet{}
		ms.Namespace, ms.Name = mapiNS, s.pick(s.sets)
		o = ms
	}
	from, err := s.flipSpec(ctx, o)
	if err != nil {
		return err
	}
	time.Sleep(time.Duration(200+s.rnd.IntN(3800)) * time.Millisecond)
	// Back to where it was, whether or not the handover has begun (a rollback if it has).
	_, err = s.requestAuthority(ctx, o, from)
	return err
}

// migrateMHC flips the MachineHealthCheck's requested authority.
func (s *soak) migrateMHC(ctx context.Context) error {
	mhc := &machinev1beta1.MachineHealthCheck{}
	if err := s.e.client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: soakMHC}, mhc); err != nil {
		return err
	}
	patch := client.MergeFromWithOptions(mhc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	_, status := mhcAuthority(mhc)
	to := otherAPI(machinev1beta1.MachineAuthority(status), machinev1beta1.MachineAuthority(mhc.Annotations[authority.MHCSynchronizedAPIAnnotation]))
	if mhc.Annotations == nil {
		mhc.Annotations = map[string]string{}
	}
	mhc.Annotations[authority.MHCAuthoritativeAPIAnnotation] = string(to)
	s.target = fmt.Sprintf("MachineHealthCheck %s (status %s) to %s", mhc.Name, status, to)
	return s.user.Patch(ctx, mhc, patch)
}

// scaleAllToZero sets every MachineSet's replicas to 0 on its authoritative side.
func (s *soak) scaleAllToZero(ctx context.Context) error {
	for _, set := range s.sets {
		ms := &machinev1beta1.MachineSet{}
		if err := s.e.client.Get(ctx, client.ObjectKey{Namespace: mapiNS, Name: set}, ms); err != nil {
			return err
		}
		var obj client.Object = &machinev1beta1.MachineSet{}
		ns := mapiNS
		if ms.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI {
			obj, ns = &clusterv1.MachineSet{}, capiNS
		}
		obj.SetNamespace(ns)
		obj.SetName(set)
		if err := s.user.SubResource("scale").Update(ctx, obj, scaleBody(ns, set, 0)); err != nil {
			return fmt.Errorf("scaling %s/%s to 0: %w", ns, set, err)
		}
	}
	return nil
}
