/* engine: placeholder until its module lands. */
