MemcpyHtoD,0x00007f6000000000,4096
kernel-7.traceg
