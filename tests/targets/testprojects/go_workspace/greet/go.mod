module example.com/greet

go 1.21
