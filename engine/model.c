/* model: placeholder until its module lands. */
