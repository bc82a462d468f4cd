"""Display names from mangled names: C++ (libstdc++), Rust legacy and v0, C, and broken input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strobe.symbols.demangle import demangle, is_cold_part, normalize_rust, split_cxx, strip_version


@pytest.mark.parametrize(
    ("raw", "name", "signature"),
    [
        ("_ZN4auth4User8validateEi", "auth::User::validate", "auth::User::validate(int)"),
        ("_ZNK3geo3BoxIiEltERKS1_", "geo::Box<int>::operator<", "geo::Box<int>::operator<(geo::Box<int> const&) const"),
        ("_ZlsRSoRK1A", "operator<<", "operator<<(std::ostream&, A const&)"),
        ("_ZN1AssERKS_", "A::operator<=>", "A::operator<=>(A const&)"),
        ("_ZN1AptEv", "A::operator->", "A::operator->()"),
        ("_ZN1AcmERKS_", "A::operator,", "A::operator,(A const&)"),
        ("_ZN1AdaEPv", "A::operator delete[]", "A::operator delete[](void*)"),
        ("_ZNK1AcvPKcEv", "A::operator char const*", "A::operator char const*() const"),
        (
            "_ZNSt8functionIFiiEEclEi",
            "std::function<int (int)>::operator()",
            "std::function<int (int)>::operator()(int)",
        ),
        ("_ZN1AclIiEEvT_", "A::operator()<int>", "A::operator()<int>(int)"),
        ("_ZZ4mainENKUliE_clEi", "main::{lambda(int)#1}::operator()", "main::{lambda(int)#1}::operator()(int) const"),
        ("_ZN12_GLOBAL__N_16helperEi", "(anonymous namespace)::helper", "(anonymous namespace)::helper(int)"),
        ("_Z10make_labelB5cxx11i", "make_label", "make_label[abi:cxx11](int)"),
        ("_Z5applyPFiiEi", "apply", "apply(int (*)(int), int)"),
        ("_Z1fIiEPFivEv", "f<int>", "f<int>()"),  # returns a function pointer: "int (*f<int>())()"
        ("_ZNKR1A1fEv", "A::f", "A::f() const &"),
        ("_ZThn16_N1C1fEv", "non-virtual thunk to C::f", "non-virtual thunk to C::f()"),
        ("_Z3fooi.constprop.0", "foo", "foo(int) [clone .constprop.0]"),
        (
            "_ZNSt17_Function_handlerIFiiEZ4mainEUliE0_E9_M_invokeERKSt9_Any_dataOi",
            "std::_Function_handler<int (int), main::{lambda(int)#2}>::_M_invoke",
            "std::_Function_handler<int (int), main::{lambda(int)#2}>::_M_invoke(std::_Any_data const&, int&&)",
        ),
        (
            "_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE4sizeEv@@GLIBCXX_3.4.21",
            "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::size",
            "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::size() const",
        ),
    ],
)
def test_cxx(raw: str, name: str, signature: str) -> None:
    assert tuple(demangle(raw)) == (name, signature)


def test_return_types_are_not_part_of_the_name() -> None:
    text = (
        "std::enable_if<is_invocable_r_v<int, main::{lambda(int)#2}&, int>, int>::type "
        "std::__invoke_r<int, main::{lambda(int)#2}&, int>(main::{lambda(int)#2}&, int&&)"
    )
    assert split_cxx(text).name == "std::__invoke_r<int, main::{lambda(int)#2}&, int>"
    assert split_cxx("bool A::operator< <int>()").name == "A::operator< <int>"
    assert split_cxx("int (*auth::getter(int))(double)") == ("auth::getter", "auth::getter(int)")


@pytest.mark.parametrize(
    ("raw", "dwarf_name", "name"),
    [
        ("_ZN5myapp6submit6handle17h0123456789abcdefE", None, "myapp::submit::handle"),
        ("_ZN3foo3bar17h0123456789abcdefE.llvm.12345", None, "foo::bar"),
        ("_ZN6rsprog7largest17h1365063562593b7bE", "largest<f64>", "rsprog::largest<f64>"),
        (
            "_ZN6rsprog4main28_$u7b$$u7b$closure$u7d$$u7d$17ha54a454df1bace29E",
            "{closure#1}",
            "rsprog::main::{closure#1}",
        ),
        ("_ZN6rsprog4main17h9d987356a29020b5E", "main", "rsprog::main"),
        ("_RNvNtCs1234_5myapp6submit6handle", None, "myapp::submit::handle"),
        ("_RNvMNtCsfhk7byK6fGb_6rsprog6submitNtB2_5Queue4push", None, "rsprog::submit::Queue::push"),
        ("_RINvCsfhk7byK6fGb_6rsprog7largestmEB2_", None, "rsprog::largest<u32>"),
        ("_RNCNvCsfhk7byK6fGb_6rsprog4mains_0B3_", None, "rsprog::main::{closure#1}"),
        (
            "_ZN54_$LT$u32$u20$as$u20$core..iter..traits..accum..Sum$GT$3sum17h1c58409f949a1e45E",
            None,
            "<u32 as core::iter::traits::accum::Sum>::sum",
        ),
    ],
)
def test_rust(raw: str, dwarf_name: str | None, name: str) -> None:
    assert tuple(demangle(raw, dwarf_name=dwarf_name)) == (name, name)


def test_rust_unit_hint_beats_the_hash_heuristic() -> None:
    assert demangle("_ZN3foo3barE", rust=True).name == "foo::bar"
    assert demangle("_ZN3foo3barEv").name == "foo::bar"  # C++ without the hint
    assert demangle("_ZN3foo3barEi", rust=True).name == "foo::bar"  # not valid Rust: falls back to C++


def test_normalize_rust_keeps_trait_impls() -> None:
    assert normalize_rust("<alloc::vec::Vec<T> as core::ops::drop::Drop>::drop") == (
        "<alloc::vec::Vec<T> as core::ops::drop::Drop>::drop"
    )
    assert normalize_rust("<core::ptr::NonNull<u32>>::as_ptr") == "core::ptr::NonNull<u32>::as_ptr"
    assert normalize_rust("core::ptr::drop_in_place::<a::B>") == "core::ptr::drop_in_place<a::B>"


@pytest.mark.parametrize(
    ("raw", "name", "signature"),
    [
        ("process_command", "process_command", "process_command"),
        ("memcpy@GLIBC_2.14", "memcpy", "memcpy"),
        ("util_check.part.0", "util_check", "util_check.part.0"),
        ("_Znot_valid_at_all", "_Znot_valid_at_all", "_Znot_valid_at_all"),
        ("_RNotRustEither", "_RNotRustEither", "_RNotRustEither"),
    ],
)
def test_plain_and_undemanglable_names(raw: str, name: str, signature: str) -> None:
    assert tuple(demangle(raw)) == (name, signature)


def test_helpers() -> None:
    assert strip_version("_ZNSt6vectorIiSaIiEE9push_backERKi@@GLIBCXX_3.4") == "_ZNSt6vectorIiSaIiEE9push_backERKi"
    assert is_cold_part("util_check.cold") and is_cold_part("_Z3fooi.cold.1") and not is_cold_part("coldstart")


@given(st.text(max_size=80))
def test_never_raises(text: str) -> None:
    result = demangle(text)
    assert isinstance(result.name, str) and isinstance(result.signature, str)
    split_cxx(text)


@given(st.text(alphabet="_ZNRKSt0123456789abcdEvilcIE$.@", max_size=40))
def test_never_raises_on_mangling_like_noise(text: str) -> None:
    demangle(text)
    demangle(text, rust=True, dwarf_name="x<y>")
