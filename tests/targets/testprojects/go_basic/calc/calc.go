// Package calc is the code under test for Strobe's go test adapter tests.
package calc

// Add adds two numbers.
func Add(a, b int) int { return a + b }

// Div divides a by b and panics when b is zero.
func Div(a, b int) int {
	return a / b
}
