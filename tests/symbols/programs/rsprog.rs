// A small Rust program for the symbol index tests (no crates). Keep the LINE markers next to what they name.
mod submit {
    pub fn handle(x: u32) -> u32 { // LINE submit::handle
        x.wrapping_mul(3)
    }

    pub struct Queue {
        pub items: Vec<u32>,
    }

    impl Queue {
        pub fn push(&mut self, v: u32) { // LINE Queue::push
            self.items.push(v);
        }
    }
}

fn largest<T: PartialOrd + Copy>(items: &[T]) -> T { // LINE largest
    let mut best = items[0];
    for &i in items {
        if i > best {
            best = i;
        }
    }
    best
}

fn main() {
    let mut q = submit::Queue { items: Vec::new() };
    q.push(submit::handle(std::env::args().count() as u32));
    let a = largest(&[1u32, 5, 3]);
    let b = largest(&[1.5f64, 0.5]);
    let offset = q.items.len() as u32;
    let add = |x: u32| x + offset; // LINE closure
    let total: u32 = q.items.iter().map(|v| add(*v)).sum();
    println!("{} {} {}", total, a, b);
}
