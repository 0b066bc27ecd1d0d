/* tok: placeholder until its module lands. */
