// A Rust target for patterns over generic functions (usage: rust_generics CONTROL_DIR). Each time
// CONTROL_DIR/round-N appears it runs one round and prints "round N done"; CONTROL_DIR/quit ends it.
// Per round, three instantiations of one generic method of a generic struct:
//   rust_generics::app::Printer<u32>::print_all<&str>     (2 items)
//   rust_generics::app::Printer<u32>::print_all<f64>      (3 items)
//   rust_generics::app::Printer<alloc::string::String>::print_all<i64>   (1 item)
// each printing one line per item; then rust_generics::app::print_all_items (not a print_all) and
// <rust_generics::app::Printer<u32> as rust_generics::app::Describe>::describe.
use std::fmt::Debug;
use std::path::Path;
use std::{thread, time::Duration};

mod app {
    use std::fmt::Debug;

    pub struct Printer<W> {
        pub label: W,
    }

    impl<W: Debug> Printer<W> {
        #[inline(never)]
        pub fn print_all<X: Debug>(&self, items: &[X]) -> usize {
            for item in items {
                println!("{:?}: {:?}", self.label, item);
            }
            items.len()
        }
    }

    pub trait Describe {
        fn describe(&self) -> String;
    }

    impl Describe for Printer<u32> {
        #[inline(never)]
        fn describe(&self) -> String {
            format!("printer {}", self.label)
        }
    }

    #[inline(never)]
    pub fn print_all_items(items: &[i32]) -> usize {
        println!("items {:?}", items);
        items.len()
    }
}

fn run_round<T: Debug>(numbers: &app::Printer<u32>, named: &app::Printer<String>, extra: T) {
    use app::Describe;
    std::hint::black_box(numbers.print_all(&["a", "b"]));
    std::hint::black_box(numbers.print_all(&[1.5, 2.5, 3.5]));
    std::hint::black_box(named.print_all(&[7i64]));
    std::hint::black_box(app::print_all_items(&[1, 2]));
    println!("{} {:?}", numbers.describe(), extra);
}

fn main() {
    let control = std::env::args().nth(1).unwrap_or_else(|| ".".to_string());
    let numbers = app::Printer { label: 42u32 };
    let named = app::Printer { label: String::from("named") };
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
        run_round(&numbers, &named, round);
        println!("round {} done", round);
        round += 1;
    }
}
