//! A target for live memory reads of Rust statics. Usage: rust_memory CONTROL_DIR
//! Prints "ready"; each time CONTROL_DIR/round-N appears, COUNTER += 1 and prints "round N done";
//! exits when CONTROL_DIR/quit appears.
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::{thread, time::Duration};

pub struct Limits {
    pub low: u16,
    pub high: u16,
}

pub struct Settings {
    pub rate: u32,
    pub gain: f64,
    pub limits: Limits,
    pub channels: [u8; 3],
}

pub static SETTINGS: Settings = Settings { rate: 48000, gain: 0.75, limits: Limits { low: 20, high: 20000 }, channels: [1, 2, 6] };
pub static COUNTER: AtomicU64 = AtomicU64::new(5);

fn main() {
    let control = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    println!("rate {} counter {}", std::hint::black_box(&SETTINGS).rate, COUNTER.load(Ordering::SeqCst));
    println!("ready");
    let mut round = 1;
    loop {
        let next = Path::new(&control).join(format!("round-{round}"));
        while !next.exists() {
            if Path::new(&control).join("quit").exists() {
                return;
            }
            thread::sleep(Duration::from_millis(5));
        }
        COUNTER.fetch_add(1, Ordering::SeqCst);
        println!("round {round} done");
        round += 1;
    }
}
