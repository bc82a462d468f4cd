#[test]
fn e2e_parses_then_adds() {
    let (a, b) = cargo_basic::parser::parse_pair("3,4");
    assert_eq!(cargo_basic::add(a, b), 7);
}
