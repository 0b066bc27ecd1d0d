/* threadpool: persistent worker pool (implemented by the CPU-kernel work). */
