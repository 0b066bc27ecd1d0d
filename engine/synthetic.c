/* synthetic: placeholder until the synthetic-model work lands. */
