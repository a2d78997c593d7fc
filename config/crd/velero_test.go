package crd_test

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/lifeboat-io/lifeboat/config/crd"
	"github.com/lifeboat-io/lifeboat/internal/testutil/velerocrds"
)

// Lifeboat's CRDs must accept everything Velero's accept and keep it, so
// that a Velero user's objects, Velero's server and Velero's CLI work
// unchanged with Lifeboat's CRDs installed, and Lifeboat's server works with
// Velero's. Velero's own CRD files (internal/testutil/velerocrds, checked
// against the Velero module by test/compat) are the reference, field by
// field: every property path and enum value of Velero's schema exists in
// Lifeboat's with the same type, and no Lifeboat rule refuses what Velero's
// allows. Subresources, printer columns and names are Velero's exactly:
// they decide how status is written and what `kubectl get` shows.
func TestCRDsAreASupersetOfVelerosOwn(t *testing.T) {
	ours, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, c := range ours {
		byName[c.Name] = c
	}
	velero, err := velerocrds.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(velero) == 0 {
		t.Fatal("no Velero CRDs to compare with")
	}
	for _, theirs := range velero {
		t.Run(theirs.Name, func(t *testing.T) {
			mine, ok := byName[theirs.Name]
			if !ok {
				t.Fatalf("Lifeboat has no CRD %s (Velero %s has one)", theirs.Name, velerocrds.Version)
			}
			for _, p := range compareCRD(theirs, mine) {
				t.Error(p)
			}
		})
	}
}

// compareCRD lists every way mine falls short of theirs.
func compareCRD(theirs, mine *apiextensionsv1.CustomResourceDefinition) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if mine.Spec.Group != theirs.Spec.Group || mine.Spec.Scope != theirs.Spec.Scope {
		add("group/scope %s/%s, Velero's %s/%s", mine.Spec.Group, mine.Spec.Scope, theirs.Spec.Group, theirs.Spec.Scope)
	}
	if !reflect.DeepEqual(normalNames(mine.Spec.Names), normalNames(theirs.Spec.Names)) {
		add("names %+v, Velero's %+v", mine.Spec.Names, theirs.Spec.Names)
	}
	for _, tv := range theirs.Spec.Versions {
		i := slices.IndexFunc(mine.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == tv.Name })
		if i < 0 {
			add("no version %s", tv.Name)
			continue
		}
		mv := mine.Spec.Versions[i]
		if mv.Served != tv.Served || mv.Storage != tv.Storage {
			add("%s: served %t storage %t, Velero's served %t storage %t", tv.Name, mv.Served, mv.Storage, tv.Served, tv.Storage)
		}
		// Velero writes status through the main resource; with a status
		// subresource, the API server drops what it writes there.
		if got, want := subresources(mv.Subresources), subresources(tv.Subresources); got != want {
			add("%s: subresources %s, Velero's %s", tv.Name, got, want)
		}
		if got, want := columns(mv.AdditionalPrinterColumns), columns(tv.AdditionalPrinterColumns); got != want {
			add("%s: printer columns\n  %s\nVelero's\n  %s", tv.Name, got, want)
		}
		if tv.Schema == nil || tv.Schema.OpenAPIV3Schema == nil {
			continue
		}
		if mv.Schema == nil || mv.Schema.OpenAPIV3Schema == nil {
			add("%s: no schema", tv.Name)
			continue
		}
		for _, p := range compareSchema(tv.Name, tv.Schema.OpenAPIV3Schema, mv.Schema.OpenAPIV3Schema) {
			add("%s", p)
		}
	}
	return problems
}

func normalNames(n apiextensionsv1.CustomResourceDefinitionNames) apiextensionsv1.CustomResourceDefinitionNames {
	n.ShortNames = slices.Sorted(slices.Values(n.ShortNames))
	n.Categories = slices.Sorted(slices.Values(n.Categories))
	if len(n.ShortNames) == 0 {
		n.ShortNames = nil
	}
	if len(n.Categories) == 0 {
		n.Categories = nil
	}
	return n
}

// subresources describes s by what the API server serves for it: an empty
// subresources stanza serves nothing, as an absent one does.
func subresources(s *apiextensionsv1.CustomResourceSubresources) string {
	var out []string
	if s != nil && s.Status != nil {
		out = append(out, "status")
	}
	if s != nil && s.Scale != nil {
		out = append(out, fmt.Sprintf("scale%+v", *s.Scale))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}

// columns describes what `kubectl get` shows; descriptions (prose, shown
// nowhere there) are left out.
func columns(cols []apiextensionsv1.CustomResourceColumnDefinition) string {
	var out []string
	for _, c := range cols {
		out = append(out, fmt.Sprintf("%s(%s,%s,%s,p%d)", c.Name, c.Type, c.Format, c.JSONPath, c.Priority))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}

// compareSchema walks theirs and lists every path mine lacks or treats
// differently: another type, a missing enum value, or a rule that refuses
// a value theirs accepts or prunes a field theirs keeps.
func compareSchema(path string, theirs, mine *apiextensionsv1.JSONSchemaProps) []string {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, path+": "+fmt.Sprintf(format, args...))
	}
	if theirs.Type != "" && mine.Type != theirs.Type {
		add("type %q, Velero's %q", mine.Type, theirs.Type)
	}
	if mine.XIntOrString != theirs.XIntOrString {
		add("int-or-string %t, Velero's %t", mine.XIntOrString, theirs.XIntOrString)
	}
	if theirs.XPreserveUnknownFields != nil && *theirs.XPreserveUnknownFields &&
		(mine.XPreserveUnknownFields == nil || !*mine.XPreserveUnknownFields) {
		add("unknown fields are pruned; Velero's keeps them")
	}
	if mine.XEmbeddedResource != theirs.XEmbeddedResource {
		add("embedded-resource %t, Velero's %t", mine.XEmbeddedResource, theirs.XEmbeddedResource)
	}
	if theirs.Nullable && !mine.Nullable {
		add("null is refused; Velero's accepts it")
	}
	if len(theirs.Enum) > 0 {
		have := map[string]bool{}
		for _, v := range mine.Enum {
			have[string(v.Raw)] = true
		}
		if len(mine.Enum) == 0 {
			add("no enum; Velero's lists %s", enumValues(theirs.Enum))
		}
		for _, v := range theirs.Enum {
			if len(mine.Enum) > 0 && !have[string(v.Raw)] {
				add("enum value %s missing", v.Raw)
			}
		}
	} else if len(mine.Enum) > 0 {
		add("enum %s; Velero's accepts any value", enumValues(mine.Enum))
	}
	for _, r := range mine.Required {
		if !slices.Contains(theirs.Required, r) {
			add("requires %q; Velero's does not", r)
		}
	}
	// Rules that refuse values: Lifeboat's may only be Velero's own.
	limits := func(s *apiextensionsv1.JSONSchemaProps) map[string]string {
		m := map[string]string{}
		put := func(k, v string) {
			if v != "" && v != "false" {
				m[k] = v
			}
		}
		put("format", s.Format)
		put("pattern", s.Pattern)
		put("minLength", opt(s.MinLength))
		put("maxLength", opt(s.MaxLength))
		put("minItems", opt(s.MinItems))
		put("maxItems", opt(s.MaxItems))
		put("minProperties", opt(s.MinProperties))
		put("maxProperties", opt(s.MaxProperties))
		put("minimum", opt(s.Minimum))
		put("maximum", opt(s.Maximum))
		put("exclusiveMinimum", fmt.Sprint(s.ExclusiveMinimum))
		put("exclusiveMaximum", fmt.Sprint(s.ExclusiveMaximum))
		put("multipleOf", opt(s.MultipleOf))
		put("uniqueItems", fmt.Sprint(s.UniqueItems))
		if len(s.XValidations) > 0 {
			m["x-kubernetes-validations"] = fmt.Sprintf("%+v", s.XValidations)
		}
		if s.XListType != nil && (*s.XListType == "set" || *s.XListType == "map") {
			m["x-kubernetes-list-type"] = *s.XListType
			m["x-kubernetes-list-map-keys"] = strings.Join(s.XListMapKeys, ",")
		}
		if s.Default != nil {
			m["default"] = string(s.Default.Raw)
		}
		return m
	}
	tl := limits(theirs)
	for k, v := range limits(mine) {
		if tl[k] != v {
			add("%s %s; Velero's %q", k, v, tl[k])
		}
	}
	if !reflect.DeepEqual(theirs.Default, mine.Default) && theirs.Default != nil {
		add("default %s, Velero's %s", raw(mine.Default), raw(theirs.Default))
	}

	for _, name := range slices.Sorted(maps.Keys(theirs.Properties)) {
		tp := theirs.Properties[name]
		mp, ok := mine.Properties[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s.%s: missing (%s)", path, name, describe(&tp)))
			continue
		}
		problems = append(problems, compareSchema(path+"."+name, &tp, &mp)...)
	}
	if theirs.Items != nil && theirs.Items.Schema != nil {
		if mine.Items == nil || mine.Items.Schema == nil {
			add("no item schema")
		} else {
			problems = append(problems, compareSchema(path+"[]", theirs.Items.Schema, mine.Items.Schema)...)
		}
	}
	if theirs.AdditionalProperties != nil && theirs.AdditionalProperties.Schema != nil {
		if mine.AdditionalProperties == nil || mine.AdditionalProperties.Schema == nil {
			add("no schema for map values")
		} else {
			problems = append(problems, compareSchema(path+"{}", theirs.AdditionalProperties.Schema, mine.AdditionalProperties.Schema)...)
		}
	}
	return problems
}

func describe(s *apiextensionsv1.JSONSchemaProps) string {
	d := s.Type
	if len(s.Enum) > 0 {
		d += " " + enumValues(s.Enum)
	}
	return d
}

func enumValues(vs []apiextensionsv1.JSON) string {
	var out []string
	for _, v := range vs {
		out = append(out, string(v.Raw))
	}
	sort.Strings(out)
	return "[" + strings.Join(out, " ") + "]"
}

func raw(j *apiextensionsv1.JSON) string {
	if j == nil {
		return "none"
	}
	return string(j.Raw)
}

// opt formats an optional limit; "" when it is not set.
func opt[T any](p *T) string {
	if p == nil {
		return ""
	}
	return fmt.Sprint(*p)
}
