/* Subcommands of the ufp4 CLI. Each takes argc/argv starting at the subcommand's own name and
 * returns the process exit status (0 ok, 1 failure, 2 usage error). */
#ifndef UFP4_CLI_COMMANDS_H
#define UFP4_CLI_COMMANDS_H

int ufp4_cmd_formats(int argc, char **argv);
int ufp4_cmd_bias(int argc, char **argv);
int ufp4_cmd_quantize(int argc, char **argv);
int ufp4_cmd_bench(int argc, char **argv);
int ufp4_cmd_tokenizer(int argc, char **argv);
int ufp4_cmd_prepare(int argc, char **argv);
int ufp4_cmd_train(int argc, char **argv);
int ufp4_cmd_eval(int argc, char **argv);
int ufp4_cmd_sample(int argc, char **argv);
int ufp4_cmd_export(int argc, char **argv);
int ufp4_cmd_compare(int argc, char **argv);
int ufp4_cmd_report(int argc, char **argv);
int ufp4_cmd_drift(int argc, char **argv);
int ufp4_cmd_sweep(int argc, char **argv);
int ufp4_cmd_study(int argc, char **argv);
int ufp4_cmd_golden(int argc, char **argv);

#endif
