module example.com/gobasic

go 1.21
