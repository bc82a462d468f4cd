// A Go target whose lines Strobe refuses to break at. Usage: go_lines CONTROL_DIR
// Prints "ready", then counts until CONTROL_DIR/quit appears and prints "counted". It uses cgo: a Go program
// linked without libc cannot be launched under Frida.
package main

// static int one(void) { return 1; }
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func main() {
	quit := filepath.Join(os.Args[1], "quit")
	fmt.Println("ready")
	count := 0
	for {
		if _, err := os.Stat(quit); err == nil {
			break
		}
		count += int(C.one())
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Println("counted")
}
