// Rust statics for the variable/type tests. Initial values are asserted by decoding the bytes of the
// binary: keep them in step with the tests.
use std::hint::black_box;

pub struct Config {
    pub retries: u32,
    pub ratio: f64,
    pub flags: [u8; 4],
    pub enabled: bool,
}

#[derive(Clone, Copy)]
pub enum Mode {
    Idle,
    Busy,
    Done,
}

pub static CONFIG: Config = Config { retries: 3, ratio: 0.5, flags: [1, 2, 3, 4], enabled: true };
pub static MODE: Mode = Mode::Busy;
pub static MAYBE: Option<u32> = Some(5);

pub static GREETING: &str = "hi";

pub fn scaled(config: &Config, factor: u32) -> f64 {
    config.ratio * f64::from(factor + config.retries)
}

pub mod engine {
    pub static LEVEL: i32 = -3;
    pub static mut COUNTER: u64 = 7;
}

fn main() {
    let c = black_box(&CONFIG);
    let m = black_box(&MODE);
    let o = black_box(&MAYBE);
    let l = black_box(&engine::LEVEL);
    let n = unsafe { black_box(*std::ptr::addr_of!(engine::COUNTER)) };
    let s = scaled(black_box(&CONFIG), black_box(2));
    println!("{} {} {} {:?} {} {} {} {}", c.retries, c.ratio, matches!(m, Mode::Busy), o, l, n, s, GREETING);
}
