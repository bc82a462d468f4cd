// Package greet is one module of a go.work workspace (Strobe's go test adapter tests).
package greet

// Hello greets someone.
func Hello(name string) string { return "hello " + name }
