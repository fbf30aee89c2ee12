package pack

import (
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/writhq/writ"
)

// DecodeYAML parses one YAML file the way pack files are parsed (no
// aliases, string keys, JSON's data model), validates it against schema,
// and decodes it into v. Every problem is reported as a writ.Detail
// naming path and the line of the offending value, in an EINVALID
// *writ.Error, so other configuration files (the MCP gateway's, say)
// give the same file:line errors as a pack.
func DecodeYAML(path string, data []byte, schema *jsonschema.Schema, v any) error {
	doc, err := parseDocument(path, data)
	if err != nil {
		return locatedError(path, []writ.Detail{detailOf(err)})
	}
	if errs := validateWith(schema, doc); len(errs) > 0 {
		return locatedError(path, errs)
	}
	if err := doc.root.Decode(v); err != nil {
		return locatedError(path, []writ.Detail{{File: path, Line: doc.root.Line, Message: err.Error()}})
	}
	return nil
}

func detailOf(err error) writ.Detail {
	if p, ok := err.(*problem); ok {
		return writ.Detail(*p)
	}
	return writ.Detail{Message: err.Error()}
}

func locatedError(path string, details []writ.Detail) error {
	msg := fmt.Sprintf("%s: %d problem(s)", path, len(details))
	if len(details) == 1 {
		msg = details[0].String()
	}
	return &writ.Error{Code: writ.EINVALID, Message: msg, Details: details}
}
