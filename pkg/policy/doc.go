// Package policy reads, validates and evaluates resource policies: the YAML
// that a Backup names through spec.resourcePolicy (a ConfigMap with one data
// key), in Velero's format:
//
//	version: v1
//	volumePolicies:
//	- conditions: {capacity: "10Gi,", storageClass: [gold]}
//	  action: {type: custom, parameters: {myCustomAction: true}}
//	includeExcludePolicy:
//	  excludedNamespaceScopedResources: [events]
//
// Parsing accepts exactly what Velero v1.18 accepts and reports every
// problem at once (see ValidationError); what Velero accepts but most
// likely never matches is kept in Policies.Warnings, each naming the field
// and the fix.
// Matching is a pure function of a Policies and a VolumeInfo; the first
// volume policy whose conditions all hold wins.
//
// The package is public because plugins meet policies through
// pkg/volumehelper, which evaluates them for each volume; the server (when
// it validates a Backup and decides its volumes) and `lifeboat policy
// validate` and `explain` use it too. Entry points: Parse, FromConfigMap
// and ParseFile to read a policy; VolumeFromPV and VolumeFromPodVolume to
// describe a volume; Policies.MatchAction to decide, and Policies.Match to
// say why.
package policy
