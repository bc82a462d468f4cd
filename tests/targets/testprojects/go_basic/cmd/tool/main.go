// Command tool has no tests: go test reports it as "[no test files]".
package main

import (
	"fmt"

	"example.com/gobasic/calc"
)

func main() { fmt.Println(calc.Add(1, 2)) }
