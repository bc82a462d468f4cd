#!/usr/bin/env bash
# A hand-written test runner (bash, for $LINENO) of the kind Strobe's Generic adapter runs: it prints what it
# does, exits 1 when a test fails, and writes a JUnit XML report to $STROBE_TEST_REPORT when that is set. It
# honours $STROBE_TEST_LEVEL (unit/integration) but not $STROBE_TEST_FILTER (Strobe filters the report itself).
. ./calc.sh

cases=""
failed=0

record() { cases="$cases$1
"; }

# expect LEVEL NAME LINE EXPECTED FUNCTION ARGS...: run FUNCTION ARGS, compare its output with EXPECTED.
expect() {
    level=$1 name=$2 line=$3 expected=$4
    shift 4
    [ -n "$STROBE_TEST_LEVEL" ] && [ "$STROBE_TEST_LEVEL" != "$level" ] && return
    errors=$(mktemp)
    if actual=$("$@" 2>"$errors"); then
        if [ "$actual" = "$expected" ]; then
            echo "PASS $name"
            record "<testcase name=\"$name\" classname=\"calc\" file=\"run_tests.sh\" line=\"$line\" time=\"0.001\"/>"
        else
            echo "FAIL $name: expected $expected, got $actual"
            failed=1
            record "<testcase name=\"$name\" classname=\"calc\" file=\"run_tests.sh\" line=\"$line\" time=\"0.001\"><failure message=\"expected $expected, got $actual\">expected $expected, got $actual
    at $1 (calc.sh)
    at run_tests.sh:$line</failure></testcase>"
        fi
    else
        echo "ERROR $name"
        failed=1
        record "<testcase name=\"$name\" classname=\"calc\" file=\"run_tests.sh\" line=\"$line\"><error>$(cat "$errors")
    at $1 (calc.sh)
    at run_tests.sh:$line</error></testcase>"
    fi
    rm -f "$errors"
}

skip() {
    level=$1 name=$2 reason=$3
    [ -n "$STROBE_TEST_LEVEL" ] && [ "$STROBE_TEST_LEVEL" != "$level" ] && return
    echo "SKIP $name"
    record "<testcase name=\"$name\" classname=\"calc\"><skipped message=\"$reason\"/></testcase>"
}

expect unit "add sums two numbers" "$LINENO" 5 add 2 3
expect unit "clamp keeps the upper bound" "$LINENO" 10 clamp 10 0 10
skip unit "parses separators" "not implemented yet"
expect integration "average of no values" "$LINENO" 0 divide 0 0

if [ -n "$STROBE_TEST_REPORT" ]; then
    {
        echo '<?xml version="1.0" encoding="UTF-8"?>'
        echo '<testsuites name="calc"><testsuite name="calc">'
        printf '%s' "$cases"
        echo '</testsuite></testsuites>'
    } > "$STROBE_TEST_REPORT"
fi
exit $failed
