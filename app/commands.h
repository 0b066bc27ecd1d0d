/* commands: one entry point per subcommand; argv[0] is the command name.
 * Each returns the process exit status (0 ok, 1 failure, 2 usage). */
#ifndef TERN_COMMANDS_H
#define TERN_COMMANDS_H

int cmd_chat(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_history(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_version(int argc, char **argv);

#endif
