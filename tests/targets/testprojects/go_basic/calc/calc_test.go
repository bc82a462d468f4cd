package calc

import "testing"

func TestAdd(t *testing.T) {
	if got := Add(2, 2); got != 4 {
		t.Fatalf("Add(2, 2) = %d, want 4", got)
	}
}

func TestAddFails(t *testing.T) {
	t.Log("checking two plus two")
	if got := Add(2, 2); got != 5 {
		t.Errorf("Add(2, 2) = %d, want 5", got)
	}
}

func TestSkipped(t *testing.T) {
	t.Skip("needs a network")
}

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b int
	}{{"zeros", 0, 0}, {"ones", 1, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			if Add(tc.a, tc.b) != tc.a+tc.b {
				t.Error("wrong sum")
			}
		})
	}
}

// TestSlow is a long test: it skips itself under -short (the unit level).
func TestSlow(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: runs without -short")
	}
}
