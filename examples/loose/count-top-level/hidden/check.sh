mkdir -p h/sub && touch h/a h/b h/c h/sub/x h/sub/y && test "$(sh count.sh h)" = 3
