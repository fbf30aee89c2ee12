package pack

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/writhq/writ"
)

// Param is one tenant parameter, declared in the pack's params file: a
// typed value with a default, which each tenant may set for itself
// (docs/pack-format.md, "Tenant parameters"). Conditions read it as
// params.<name>.
type Param struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// SchemaDoc is the parameter's JSON Schema as written; Default its
	// default, as JSON decodes it (numbers are float64).
	SchemaDoc any `yaml:"-"`
	Default   any `yaml:"-"`

	Schema *jsonschema.Schema `yaml:"-"`
	Pos    Pos                `yaml:"-"`
}

// loadParams reads the params file (manifest params:) into p.Params.
func (l *loader) loadParams(p *Pack, rel string) {
	doc := l.read(rel, "params")
	if doc == nil {
		return
	}
	list, _ := doc.value.(map[string]any)["params"].([]any)
	seen := map[string]Pos{}
	for i, item := range list {
		m := item.(map[string]any)
		ptr := fmt.Sprintf("/params/%d", i)
		pa := &Param{Name: m["name"].(string), Pos: l.pos(doc, ptr), SchemaDoc: m["schema"]}
		if d, ok := m["description"].(string); ok {
			pa.Description = d
		}
		if prev, dup := seen[pa.Name]; dup {
			l.addf(l.pos(doc, ptr+"/name"), "parameter %q is already defined at %s", pa.Name, prev)
			continue
		}
		seen[pa.Name] = pa.Pos
		def, err := jsonValue(m["default"])
		if err != nil {
			l.addf(l.pos(doc, ptr+"/default"), "default: %v", err)
			continue
		}
		pa.Default = def
		sch, err := compileParamSchema(pa.Name, pa.SchemaDoc)
		if err != nil {
			l.addf(l.pos(doc, ptr+"/schema"), "schema: %v", err)
			continue
		}
		pa.Schema = sch
		if err := sch.Validate(def); err != nil {
			l.addf(l.pos(doc, ptr+"/default"), "default %s does not match the parameter's schema: %v", compactJSON(def), leafMessage(err))
			continue
		}
		p.Params = append(p.Params, pa)
	}
}

func compileParamSchema(name string, doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := schemaBase + "params/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// jsonValue returns v as encoding/json decodes its JSON: the one shape
// parameter values take everywhere (defaults, tenant values, pinned
// values), so that a value compares and hashes the same wherever it came
// from.
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func compactJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// leafMessage is the first leaf cause of a schema validation error.
func leafMessage(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	msg := ve.ErrorKind.LocalizedString(printer)
	if where := strings.Join(ve.InstanceLocation, "."); where != "" {
		msg = where + ": " + msg
	}
	return msg
}

// Param returns the parameter named name, or nil.
func (p *Pack) Param(name string) *Param {
	for _, pa := range p.Params {
		if pa.Name == name {
			return pa
		}
	}
	return nil
}

// CheckParams checks a tenant's parameter values (some or all of the
// pack's parameters, by name) against the parameters' schemas. Every
// problem is one detail, its Field "values.<name>"; none is EINVALID.
// It returns the values as JSON decodes them.
func (p *Pack) CheckParams(values map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(values))
	var ds []writ.Detail
	for _, name := range slices.Sorted(maps.Keys(values)) {
		pa := p.Param(name)
		if pa == nil {
			ds = append(ds, writ.Detail{Field: "values." + name, Message: fmt.Sprintf("pack %s declares no parameter %q", p.ID(), name)})
			continue
		}
		v, err := jsonValue(values[name])
		if err == nil {
			err = pa.Schema.Validate(v)
		}
		if err != nil {
			ds = append(ds, writ.Detail{Field: "values." + name, Message: fmt.Sprintf("%s does not match the parameter's schema: %s", compactJSON(values[name]), leafMessage(err))})
			continue
		}
		out[name] = v
	}
	if len(ds) > 0 {
		msg := ds[0].Field + ": " + ds[0].Message
		if len(ds) > 1 {
			msg = fmt.Sprintf("%d parameter values are invalid", len(ds))
		}
		return nil, &writ.Error{Code: writ.EINVALID, Message: msg, Details: ds}
	}
	return out, nil
}

// EffectiveParams returns the values conditions read for a tenant whose
// own values are set (nil when it set none): every declared parameter,
// set's value where it has one, else the default. A value set for a
// parameter the pack no longer declares is left out. It returns nil when
// the pack declares no parameter.
func (p *Pack) EffectiveParams(set map[string]any) map[string]any {
	if len(p.Params) == 0 {
		return nil
	}
	out := make(map[string]any, len(p.Params))
	for _, pa := range p.Params {
		if v, ok := set[pa.Name]; ok {
			out[pa.Name] = v
			continue
		}
		out[pa.Name] = pa.Default
	}
	return out
}

// ParamsKeyPrefix begins the decision key of a tenant's parameter
// change record: "params:<pack name>".
const ParamsKeyPrefix = "params:"

// ParamsKey is the decision key of the parameter change records of the
// pack's tenants.
func (p *Pack) ParamsKey() string { return ParamsKeyPrefix + p.Name }

// ErasureKeyPrefix begins the decision key of an erasure of classified
// values: "erasure:<pack name>".
const ErasureKeyPrefix = "erasure:"

// ErasureKey is the decision key of erasure records under this pack.
func (p *Pack) ErasureKey() string { return ErasureKeyPrefix + p.Name }

// Classifies reports whether any redaction rule of the pack is classified.
func (p *Pack) Classifies() bool {
	for _, r := range p.Controls.Redaction {
		if r.Classification != "" {
			return true
		}
	}
	return false
}
