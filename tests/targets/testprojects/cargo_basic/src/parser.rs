//! Parses "a,b" into a pair: the panic inside `parse_pair` gives a failing test of the crate's root
//! module a backtrace through this one.

pub fn parse_pair(text: &str) -> (i32, i32) {
    let (a, b) = text.split_once(',').expect("a pair needs a comma");
    (a.trim().parse().unwrap(), b.trim().parse().unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pair() {
        assert_eq!(parse_pair("1, 2"), (1, 2));
    }
}
