module example.com/govalues

go 1.18
