// Package shout is the other module of the workspace.
package shout

import "strings"

// Shout upper-cases text.
func Shout(text string) string { return strings.ToUpper(text) }
