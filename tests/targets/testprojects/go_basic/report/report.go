// Package report uses calc: a panic in calc.Div shows up in the failing report test's goroutine trace.
package report

import "example.com/gobasic/calc"

// Ratio is a/b, through calc.Div.
func Ratio(a, b int) int { return calc.Div(a, b) }
