package report

import "testing"

func TestRatio(t *testing.T) {
	if Ratio(8, 2) != 4 {
		t.Fatal("bad ratio")
	}
}

// TestRatioPanics divides by zero; it is last in the package because a panic ends the test binary.
func TestRatioPanics(t *testing.T) {
	Ratio(1, 0)
}
