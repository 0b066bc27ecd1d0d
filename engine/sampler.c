/* sampler: placeholder until its module lands. */
