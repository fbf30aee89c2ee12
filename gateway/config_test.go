package gateway_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
)

func TestParseConfigErrorsHaveFileAndLine(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", "tenant: acme\nupstreams:\n  - name: a\n    stdio: {command: x}\n    colour: blue\n", "gw.yaml:5: upstreams.0: unknown field \"colour\""},
		{"neither stdio nor http", "upstreams:\n  - name: a\n", "gw.yaml:2:"},
		{"both stdio and http", "upstreams:\n  - name: a\n    stdio: {command: x}\n    http: {url: 'http://h/mcp'}\n", "gw.yaml:2:"},
		{"bad unlisted", "unlisted: allow\nupstreams:\n  - {name: a, stdio: {command: x}}\n", "gw.yaml:1: unlisted:"},
		{"no upstreams", "tenant: acme\n", "gw.yaml:1:"},
		{"bad url", "upstreams:\n  - {name: a, http: {url: 'ftp://h'}}\n", "gw.yaml:2: upstreams.0.http.url:"},
		{"syntax", "upstreams: [\n", "gw.yaml:"},
		{"binary", "upstreams:\n  - {name: !!binary AAAA, stdio: {command: x}}\n", "gw.yaml:2: binary values (!!binary) are not supported"},
		{"twice", "upstreams:\n  - {name: a, stdio: {command: x}}\n  - {name: a, stdio: {command: y}}\n", "gw.yaml:3: upstream \"a\" is defined twice (first at line 2); upstream names are unique"},
		{"twice, block style", "upstreams:\n  - stdio: {command: x}\n    name: a\n  - name: b\n    http: {url: 'http://h/mcp'}\n  -\n    http: {url: 'http://h/mcp'}\n    name:\n      a\n", "gw.yaml:8: upstream \"a\" is defined twice (first at line 3); upstream names are unique"},
	} {
		_, err := gateway.ParseConfig("gw.yaml", []byte(tc.yaml))
		var we *writ.Error
		if !errors.As(err, &we) || we.Code != writ.EINVALID {
			t.Errorf("%s: ParseConfig = %v, want EINVALID", tc.name, err)
			continue
		}
		var lines []string
		for _, d := range we.Details {
			lines = append(lines, d.String())
		}
		if got := strings.Join(lines, "\n"); !strings.Contains(got, tc.want) {
			t.Errorf("%s: ParseConfig problems =\n%s\nwant one containing %q", tc.name, got, tc.want)
		}
	}
	c, err := gateway.ParseConfig("gw.yaml", []byte("upstreams:\n  - {name: a, stdio: {command: x}}\n"))
	if err != nil || c.Unlisted != gateway.UnlistedHide {
		t.Errorf("ParseConfig(minimal) = %+v, %v; want unlisted hide by default", c, err)
	}
}
