package report

import "testing"

func TestE2EFullReport(t *testing.T) {
	if Ratio(6, 3) != 2 {
		t.Fatal("bad ratio")
	}
}
