/* backend_cuda: placeholder until its module lands. */
