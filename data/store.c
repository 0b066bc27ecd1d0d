/* store: placeholder until the history store lands. */
