package greet

import "testing"

func TestHello(t *testing.T) {
	if got := Hello("go"); got != "hello go!" {
		t.Errorf("Hello(go) = %q", got)
	}
}
