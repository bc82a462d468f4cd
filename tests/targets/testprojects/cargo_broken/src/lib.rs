//! Does not compile, on purpose: the adapter must report the compiler's error, not crash.

pub fn add(a: i32, b: i32) -> i32 {
    a + "not a number"
}

#[cfg(test)]
mod tests {
    #[test]
    fn add_works() {
        assert_eq!(super::add(1, 1), 2);
    }
}
