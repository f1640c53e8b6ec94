module hookrecv

go 1.21
