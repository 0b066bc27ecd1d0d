/* ui: placeholder until the terminal UI lands. */
