//! A target for line breakpoints in Rust threads. Usage: rust_lines CONTROL_DIR [overflow]
//! A thread named "ticker" prints "tick N" every 5 ms until the end. Having started it, prints "ready"; once
//! CONTROL_DIR/go appears, a thread named "squares" adds the squares of 1..=5 (printing "square N" for each), then
//! the main thread multiplies 1..=5 (printing "factor N"), stops the ticker and prints "sum 55 product 120".
//! With `overflow`, a thread named "deep" overflows its stack instead (std's handler reports it and aborts).
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::{thread, time::Duration};

static STOP: AtomicBool = AtomicBool::new(false);

fn add_square(sum: u64, i: u64) -> u64 {
    sum + i * i
}

fn times(product: u64, i: u64) -> u64 {
    product * i
}

// A loop's line that is one call has one run of code (a line with overflow checks has several, each a location).
fn sum_of_squares(n: u64) -> u64 {
    let mut sum = 0;
    for i in 1..=n {
        sum = add_square(sum, i);
        println!("square {i}");
    }
    sum
}

fn product(n: u64) -> u64 {
    let mut product = 1;
    for i in 1..=n {
        product = times(product, i);
        println!("factor {i}");
    }
    product
}

#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 32]);
    recurse(depth + 1) + frame[1]
}

fn main() {
    let control = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let overflow = std::env::args().nth(2).as_deref() == Some("overflow");
    let ticker = thread::Builder::new().name("ticker".into()).spawn(|| {
        let mut tick = 0;
        while !STOP.load(Ordering::SeqCst) {
            tick += 1;
            println!("tick {tick}");
            thread::sleep(Duration::from_millis(5));
        }
    }).expect("spawn ticker");
    println!("ready");
    while !Path::new(&control).join("go").exists() {
        thread::sleep(Duration::from_millis(5));
    }
    if overflow {
        let deep = thread::Builder::new().name("deep".into()).spawn(|| recurse(0)).expect("spawn deep");
        println!("{}", deep.join().expect("deep thread"));
    }
    let squares = thread::Builder::new().name("squares".into()).spawn(|| sum_of_squares(5)).expect("spawn squares");
    let sum = squares.join().expect("squares thread");
    let product = product(5);
    STOP.store(true, Ordering::SeqCst);
    ticker.join().expect("ticker thread");
    println!("sum {sum} product {product}");
}
