// A Go target for tracing: goroutines, garbage, stack growth, and functions whose arguments and results are ints,
// strings and slices. Usage: go_values [-exit N | -panic] [ROUNDS]
// Runs ROUNDS rounds (default 3); each round starts 16 goroutines that call the functions below many times,
// allocate (the garbage collector runs) and recurse deeply (their stacks grow and are copied), then prints
// "round N". At the end it prints "total T", then with -wait prints "ready" and waits for DIR/quit, and exits 0, or
// exits N (os.Exit), or panics (exit code 2).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

var counter int64 = 41

var label = "go values"

//go:noinline
func add(a, b int) int {
	return a + b
}

//go:noinline
func mix(a int, s string, xs []int, b int64, flag bool) (int, string) {
	sum := a + len(s) + int(b)
	for _, x := range xs {
		sum += x
	}
	if flag {
		sum++
	}
	return sum, s[:len(s)/2]
}

//go:noinline
func many(a, b, c, d, e, f, g, h, i int) int {
	return a + b*2 + c*3 + d*4 + e*5 + f*6 + g*7 + h*8 + i*9
}

//go:noinline
func divmod(a, b int) (q, r int) {
	q = a / b
	r = a % b
	return
}

//go:noinline
func depth(n int) int {
	var pad [64]byte
	pad[n%64] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return depth(n-1) + int(pad[n%64]&1)
}

//go:noinline
func garbage(n int) int {
	parts := make([]string, 0, n)
	for i := 0; i < n; i++ {
		parts = append(parts, strconv.Itoa(i))
	}
	return len(strings.Join(parts, ","))
}

func worker(id int, wg *sync.WaitGroup, out chan<- int) {
	defer wg.Done()
	total := 0
	for i := 0; i < 200; i++ {
		total = add(total, i)
		s, _ := mix(i, "hello, goroutine", []int{1, 2, 3}, int64(id), i%2 == 0)
		total += s
		q, r := divmod(total, 7)
		total += q%3 + r
		total += many(1, 2, 3, 4, 5, 6, 7, 8, i)
		if i%50 == 0 {
			total += depth(200 + id*10)
			total += garbage(100)
			runtime.Gosched()
		}
	}
	out <- total
}

func main() {
	mode, code, rounds, wait := "", 0, 3, ""
	args := os.Args[1:]
	for len(args) > 0 {
		switch args[0] {
		case "-exit":
			mode, code = "exit", atoi(args[1])
			args = args[2:]
		case "-wait":
			wait = args[1]
			args = args[2:]
		case "-panic":
			mode = "panic"
			args = args[1:]
		default:
			rounds = atoi(args[0])
			args = args[1:]
		}
	}
	grand := 0
	for round := 1; round <= rounds; round++ {
		var wg sync.WaitGroup
		out := make(chan int, 16)
		for id := 0; id < 16; id++ {
			wg.Add(1)
			go worker(id, &wg, out)
		}
		wg.Wait()
		close(out)
		for t := range out {
			grand += t
		}
		runtime.GC()
		counter++
		fmt.Println("round", round)
	}
	fmt.Println("total", grand, label, counter)
	if wait != "" {
		fmt.Println("ready")
		for {
			if _, err := os.Stat(filepath.Join(wait, "quit")); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	switch mode {
	case "exit":
		os.Exit(code)
	case "panic":
		panic("asked to panic")
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}
