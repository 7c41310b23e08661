MemcpyHtoD,0xffffffffffffffff,200000
kernel-1.traceg
