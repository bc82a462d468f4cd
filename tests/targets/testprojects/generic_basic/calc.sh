# The code under test: integer helpers in POSIX sh.

add() { echo $(($1 + $2)); }

# Bug on purpose: the upper bound is treated as exclusive.
clamp() {
    if [ "$1" -lt "$2" ]; then echo "$2"
    elif [ "$1" -ge "$3" ]; then echo $(($3 - 1))
    else echo "$1"
    fi
}

divide() {
    if [ "$2" -eq 0 ]; then
        echo "divide: division by zero" >&2
        return 1
    fi
    echo $(($1 / $2))
}
