test "$(python3 greet.py Ann)" = "Hello, Ann!" && test "$(python3 greet.py Bo)" = "Hello, Bo!"
