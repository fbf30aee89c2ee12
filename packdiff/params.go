package packdiff

import "github.com/writhq/writ/pack"

// params compares the packs' tenant parameters: a parameter added,
// removed, or with another schema, default or description. Whether a
// change tightens cannot be told in general (a lower default limit is
// tighter, a lower default threshold of a warning looser), so none has a
// direction. A changed default changes the decisions of every tenant
// that did not set the parameter; a changed schema can leave a tenant's
// stored value unfit, which fails its checks closed until it sets one
// (docs/pack-format.md, "Tenant parameters").
func (d *differ) params(old, new *pack.Pack) {
	key := func(p *pack.Param) string { return p.Name }
	om, nm := byKey(old.Params, key), byKey(new.Params, key)
	for _, k := range keys(om, nm) {
		a, b := om[k], nm[k]
		s := "parameter " + k
		switch {
		case a == nil:
			d.add(b.Pos, s, "added", "", "default "+jsonText(b.Default), "")
		case b == nil:
			d.add(a.Pos, s, "removed", "default "+jsonText(a.Default), "", "")
		default:
			d.field(b.Pos, s, "schema", jsonText(a.SchemaDoc), jsonText(b.SchemaDoc), "")
			d.field(b.Pos, s, "default", jsonText(a.Default), jsonText(b.Default), "")
			d.field(b.Pos, s, "description", a.Description, b.Description, "")
		}
	}
}
