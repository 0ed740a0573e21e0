printf 'amount,item,qty\n4,pen,100\n5,ink,200\n' > other.csv && test "$(python3 total.py other.csv)" = 9
