/* template: placeholder until its module lands. */
