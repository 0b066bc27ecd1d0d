/* metrics: placeholder until its module lands. */
