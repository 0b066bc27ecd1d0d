/* kv: placeholder until its module lands. */
