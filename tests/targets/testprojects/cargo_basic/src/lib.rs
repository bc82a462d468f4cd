//! A tiny library whose unit tests pass, fail and skip on purpose (Strobe's cargo adapter tests).

pub mod parser;

/// Adds two numbers.
///
/// ```
/// assert_eq!(cargo_basic::add(1, 2), 3);
/// ```
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_works() {
        assert_eq!(add(2, 2), 4);
    }

    #[test]
    fn add_fails() {
        println!("checking two plus two");
        assert_eq!(add(2, 2), 5, "two plus two should be five");
    }

    #[test]
    fn sums_a_pair() {
        let (a, b) = parser::parse_pair("1 2");
        assert_eq!(add(a, b), 3);
    }

    #[test]
    #[ignore = "needs a network"]
    fn talks_to_network() {
        panic!("never runs");
    }
}
