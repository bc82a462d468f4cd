//go:build integration

package calc

import "testing"

func TestStoreRoundTrip(t *testing.T) {
	if Add(1, 2) != 3 {
		t.Fatal("round trip failed")
	}
}
