// Package calc does not compile, on purpose: the adapter must report the compiler's error.
package calc

func Add(a, b int) int { return a + "not a number" }
