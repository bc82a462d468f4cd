//! Closures called through Fn, FnMut and FnOnce, capturing by reference and by move, and one capturing nothing:
//! rustc's DWARF lists the environment parameter of the last one only, yet every closure body takes its
//! environment in the first register (tests/daemon/test_signatures.py).

#[inline(never)]
fn apply<F: Fn(i64, i64) -> i64>(f: F, a: i64) -> i64 {
    f(a, 7)
}

#[inline(never)]
fn apply_mut<F: FnMut(i64) -> i64>(mut f: F) -> i64 {
    f(5)
}

#[inline(never)]
fn apply_once<F: FnOnce(i64) -> i64>(f: F) -> i64 {
    f(9)
}

fn main() {
    let k: i64 = std::env::args().count() as i64 + 100;
    let s = String::from("hi");
    let mut total = 0;
    let by_ref = apply(|x, y| x * y + k, 3);
    let capturing_nothing = apply(|x, y| x - y, 4);
    let by_mut = apply_mut(|x| {
        total += x;
        total + k
    });
    let by_move = apply_once(move |x| x + s.len() as i64);
    println!("{by_ref} {capturing_nothing} {by_mut} {by_move}");
}
