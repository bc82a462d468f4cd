// A Rust target for tracing (usage: rust_app CONTROL_DIR). Each time CONTROL_DIR/round-N appears it
// runs one round and prints "round N done"; CONTROL_DIR/quit ends it. Per round:
// rust_app::submit::handle(3) -> rust_app::form::validate(3) (false); rust_app::form::validate(12);
// rust_app::geometry::Square::area(&Square { side: 4 }) -> 16; rust_app::double::<i64>(21).
use std::path::Path;
use std::{thread, time::Duration};

mod form {
    #[inline(never)]
    pub fn validate(fields: i32) -> bool {
        fields > 10
    }
}

mod submit {
    #[inline(never)]
    pub fn handle(fields: i32) -> i32 {
        if crate::form::validate(fields) { 0 } else { 1 }
    }
}

mod geometry {
    pub struct Square {
        pub side: i64,
    }
    impl Square {
        #[inline(never)]
        pub fn area(&self) -> i64 {
            self.side * self.side
        }
    }
}

#[inline(never)]
fn double<T: std::ops::Add<Output = T> + Copy>(x: T) -> T {
    x + x
}

fn main() {
    let control = std::env::args().nth(1).unwrap_or_else(|| ".".to_string());
    println!("ready");
    let mut round = 1;
    loop {
        let next = format!("{}/round-{}", control, round);
        while !Path::new(&next).exists() {
            if Path::new(&format!("{}/quit", control)).exists() {
                return;
            }
            thread::sleep(Duration::from_millis(5));
        }
        std::hint::black_box(submit::handle(std::hint::black_box(3)));
        std::hint::black_box(form::validate(std::hint::black_box(12)));
        let square = geometry::Square { side: 4 };
        std::hint::black_box(square.area());
        std::hint::black_box(double::<i64>(21));
        println!("round {} done", round);
        round += 1;
    }
}
