MemcpyHtoD,0x00007f4000000000,256
kernel-1.traceg
