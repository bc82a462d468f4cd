// Rust's own types as arguments and return values (usage: rust_values CONTROL_DIR [once]). Prints "ready",
// then each time CONTROL_DIR/round-N appears runs one round of calls and prints "round N done";
// CONTROL_DIR/quit ends it. With a second argument "once" it runs one round at once and exits (for gdb).
// Every round passes the same values: tests/e2e/test_lang_values.py compares what Strobe shows for them
// with what gdb reads from the same calls' raw fields.
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::{thread, time::Duration};

#[derive(Clone, Copy)]
pub struct Point {
    pub x: i32,
    pub y: i32,
}

pub mod vals {
    use super::Point;
    use std::rc::Rc;
    use std::sync::Arc;

    #[inline(never)]
    pub fn take_str(s: &str) -> usize {
        s.len()
    }
    #[inline(never)]
    pub fn take_string(s: String) -> usize {
        s.len()
    }
    #[inline(never)]
    pub fn take_slice(v: &[i32]) -> i32 {
        v.iter().sum()
    }
    #[inline(never)]
    pub fn take_vec(v: Vec<String>) -> usize {
        v.len()
    }
    #[inline(never)]
    pub fn take_opt(x: Option<u32>) -> u32 {
        x.unwrap_or(7)
    }
    #[inline(never)]
    pub fn take_opt_str(x: Option<&str>) -> usize {
        x.map_or(0, |s| s.len())
    }
    #[inline(never)]
    pub fn take_result(r: Result<i32, String>) -> i32 {
        match r {
            Ok(v) => v,
            Err(e) => e.len() as i32,
        }
    }
    #[inline(never)]
    pub fn take_box(b: Box<Point>) -> i32 {
        b.x + b.y
    }
    #[inline(never)]
    pub fn take_rc(r: Rc<Point>) -> i32 {
        r.x * r.y
    }
    #[inline(never)]
    pub fn take_arc(a: Arc<Vec<i32>>) -> usize {
        a.len()
    }
    #[inline(never)]
    pub fn take_big(v: &Vec<u64>, s: &str) -> usize {
        v.len() + s.len()
    }
    #[inline(never)]
    pub fn make_string(n: usize) -> String {
        "ab".repeat(n)
    }
    #[inline(never)]
    pub fn make_opt(x: u32) -> Option<u32> {
        if x > 0 { Some(x * 2) } else { None }
    }
    #[inline(never)]
    pub fn make_result(ok: bool) -> Result<i32, String> {
        if ok { Ok(42) } else { Err(String::from("bad input")) }
    }
}

fn round(big: &Vec<u64>, huge: &str) -> usize {
    use std::hint::black_box as bb;
    let mut total = 100usize;
    total += bb(vals::take_str(bb("héllo wörld")));
    total += bb(vals::take_string(bb(String::from("owned text"))));
    total += bb(vals::take_slice(bb(&[3, -1, 4, 1, -5][..]))) as usize;
    total += bb(vals::take_vec(bb(vec![String::from("alpha"), String::from("beta"), String::new()])));
    total += bb(vals::take_opt(bb(Some(17)))) as usize;
    total += bb(vals::take_opt(bb(None))) as usize;
    total += bb(vals::take_opt_str(bb(Some("maybe"))));
    total += bb(vals::take_opt_str(bb(None)));
    total = total.wrapping_add(bb(vals::take_result(bb(Ok(-9)))) as usize);
    total += bb(vals::take_result(bb(Err(String::from("failed here"))))) as usize;
    total = total.wrapping_add(bb(vals::take_box(bb(Box::new(Point { x: 5, y: -6 })))) as usize);
    total += bb(vals::take_rc(bb(Rc::new(Point { x: 7, y: 8 })))) as usize;
    total += bb(vals::take_arc(bb(Arc::new(vec![10, 20, 30]))));
    total += bb(vals::take_big(bb(big), bb(huge)));
    total += bb(vals::make_string(bb(3))).len();
    total += bb(vals::make_opt(bb(21))).unwrap_or(0) as usize;
    total += bb(vals::make_opt(bb(0))).unwrap_or(0) as usize;
    total += bb(vals::make_result(bb(true))).unwrap_or(0) as usize;
    total += bb(vals::make_result(bb(false))).unwrap_or(0) as usize;
    total
}

fn main() {
    let control = std::env::args().nth(1).unwrap_or_else(|| ".".to_string());
    let once = std::env::args().nth(2).is_some();
    let big: Vec<u64> = (0..5000u64).collect();
    let huge = "x".repeat(5000);
    println!("ready");
    let mut n = 1;
    loop {
        if !once {
            let next = format!("{}/round-{}", control, n);
            while !Path::new(&next).exists() {
                if Path::new(&format!("{}/quit", control)).exists() {
                    return;
                }
                thread::sleep(Duration::from_millis(5));
            }
        }
        let total = round(&big, &huge);
        println!("round {} done", n);
        std::hint::black_box(total);
        if once {
            return;
        }
        n += 1;
    }
}
