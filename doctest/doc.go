// Package doctest holds the tests that keep writ's documentation true:
// every relative link and anchor in README.md and docs/ resolves
// (links_test.go), and every shell walkthrough in the README and
// docs/tutorials/ runs, as written, against the built binary, printing
// what the docs show (walkthrough_test.go). It has no code of its own
// outside its tests.
package doctest
