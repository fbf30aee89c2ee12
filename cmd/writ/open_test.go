package main

import (
	"strings"
	"testing"
)

// TestRedactURL: a store URL printed in an error keeps no password, in
// any of the forms PostgreSQL connection strings take.
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://writ:s3cret@db:5432/ledger?sslmode=require", "postgres://writ:xxxxx@db:5432/ledger?sslmode=require"},
		{"postgres://writ@db/ledger?password=s3cret&sslmode=disable", "postgres://writ@db/ledger?password=xxxxx&sslmode=disable"},
		{"postgresql://db/ledger", "postgresql://db/ledger"},
		{"host=db user=writ password=s3cret dbname=ledger", "host=db user=writ password=xxxxx dbname=ledger"},
		{"host=db password = 's3 cr\\'et' dbname=ledger", "host=db password = xxxxx dbname=ledger"},
		{"host=db PASSWORD=s3cret", "host=db PASSWORD=xxxxx"},
		{"host=db sslkey=/k sslpassword=s3cret", "host=db sslkey=/k sslpassword=xxxxx"},
		{"postgres://db/ledger?sslpassword=s3cret", "postgres://db/ledger?sslpassword=xxxxx"},
		{"host=db user=writ", "host=db user=writ"},
		{"postgres://writ:s3cret@db:bad port/x", "(unparseable URL)"},
	} {
		got := redactURL(tc.in)
		if got != tc.want || strings.Contains(got, "s3") {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
