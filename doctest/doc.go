// Package doctest holds the tests that keep writ's documentation true:
// every relative link and anchor in README.md and docs/ resolves. It has
// no code of its own outside its tests.
package doctest
