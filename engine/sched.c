/* sched: placeholder until its module lands. */
