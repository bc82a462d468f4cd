#[test]
fn adds_through_the_public_api() {
    assert_eq!(cargo_basic::add(40, 2), 42);
}
