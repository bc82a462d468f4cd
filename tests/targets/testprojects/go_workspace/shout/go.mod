module example.com/shout

go 1.21
