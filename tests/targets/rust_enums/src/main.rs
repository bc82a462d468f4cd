//! Rust enums passed and returned by value: rustc gives one whose tag and variants' data fit two scalars at
//! fixed offsets two registers (integer or xmm), and any other small one a single integer register; niche
//! layouts (Option<&str>, Option<Box<T>>) use the data's own registers. Each function takes `after` last, so
//! where it lands says how many registers the enum took (tests/daemon/test_signatures.py reads them in gdb).
use std::hint::black_box as bb;

#[derive(Clone, Copy)]
pub enum Shape {
    Dot,
    Circle(f64),
    Square(f64),
}

#[derive(Clone, Copy)]
pub enum Mixed {
    A(i32),
    B(u32),
}

#[derive(Clone, Copy)]
pub enum Small {
    X(u8),
    Y(u16),
}

#[inline(never)]
fn opt_u32(x: Option<u32>, after: u64) -> u64 {
    x.unwrap_or(1) as u64 + after
}
#[inline(never)]
fn opt_u8(x: Option<u8>, after: u64) -> u64 {
    x.unwrap_or(1) as u64 + after
}
#[inline(never)]
fn opt_f64(x: Option<f64>, after: u64) -> u64 {
    x.unwrap_or(1.0) as u64 + after
}
#[inline(never)]
fn opt_str(x: Option<&str>, after: u64) -> u64 {
    x.map_or(0, |s| s.len()) as u64 + after
}
#[inline(never)]
fn opt_box(x: Option<Box<u64>>, after: u64) -> u64 {
    x.map_or(0, |b| *b) + after
}
#[inline(never)]
fn res(x: Result<i32, u32>, after: u64) -> u64 {
    (match x {
        Ok(v) => v as u64,
        Err(e) => e as u64,
    }) + after
}
#[inline(never)]
fn shape(x: Shape, after: u64) -> u64 {
    (match x {
        Shape::Dot => 0.0,
        Shape::Circle(r) => r,
        Shape::Square(s) => s,
    }) as u64
        + after
}
#[inline(never)]
fn mixed(x: Mixed, after: u64) -> u64 {
    (match x {
        Mixed::A(v) => v as u64,
        Mixed::B(v) => v as u64,
    }) + after
}
#[inline(never)]
fn small(x: Small, after: u64) -> u64 {
    (match x {
        Small::X(v) => v as u64,
        Small::Y(v) => v as u64,
    }) + after
}
#[inline(never)]
fn make_opt(x: u32) -> Option<u32> {
    if x > 0 { Some(x * 2) } else { None }
}
#[inline(never)]
fn make_shape(r: f64) -> Shape {
    if r > 0.0 { Shape::Circle(r) } else { Shape::Dot }
}

fn main() {
    let mut t = 0u64;
    t += opt_u32(bb(Some(17)), 5) + opt_u32(bb(None), 6);
    t += opt_u8(bb(Some(200)), 5);
    t += opt_f64(bb(Some(2.5)), 5);
    t += opt_str(bb(Some("maybe")), 5) + opt_str(bb(None), 6);
    t += opt_box(bb(Some(Box::new(9))), 5);
    t += res(bb(Err(44)), 5) + res(bb(Ok(3)), 6);
    t += shape(bb(Shape::Circle(1.5)), 5) + shape(bb(Shape::Dot), 6);
    t += mixed(bb(Mixed::B(77)), 5);
    t += small(bb(Small::Y(300)), 5);
    t += make_opt(bb(4)).unwrap_or(0) as u64 + make_opt(bb(0)).unwrap_or(0) as u64;
    t += match make_shape(bb(0.75)) {
        Shape::Circle(r) | Shape::Square(r) => r as u64,
        Shape::Dot => 0,
    };
    println!("{t}");
}
