/* backend_cpu: placeholder until its module lands. */
