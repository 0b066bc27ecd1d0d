/* gguf: placeholder until its module lands. */
