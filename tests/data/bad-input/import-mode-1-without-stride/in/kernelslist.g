MemcpyHtoD,0x00007f2000000000,131072
kernel-1.traceg
