//! Paused-frames target in Rust (usage: rust_frames CONTROL_DIR): run(1) -> weigh(10, 7) -> scale(10, 3). Prints
//! "ready", waits for CONTROL_DIR/go, prints "round 1 result 37" (10 * 3 + 7), exits when CONTROL_DIR/quit exists.
use std::path::Path;
use std::{thread, time::Duration};

#[inline(never)]
fn scale(value: u64, factor: u64) -> u64 {
    value * factor
}

#[inline(never)]
fn weigh(base: u64, bonus: u64) -> u64 {
    let mut extra = bonus;
    let scaled = scale(base, 3);
    extra += scaled;
    extra
}

#[inline(never)]
fn run(round: u64) -> u64 {
    let base = 10 * round;
    let result = weigh(base, 7);
    println!("round {round} result {result}");
    result
}

fn wait_for(control: &str, name: &str) {
    while !Path::new(control).join(name).exists() {
        thread::sleep(Duration::from_millis(2));
    }
}

fn main() {
    let control = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    println!("ready");
    wait_for(&control, "go");
    run(1);
    wait_for(&control, "quit");
}
