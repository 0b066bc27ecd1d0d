/* backend: placeholder until its module lands. */
