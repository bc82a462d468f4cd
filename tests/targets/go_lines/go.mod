module example.com/golines

go 1.18
