/* Small helpers shared by the subcommands for "--flag value" and "--flag=value" options. */
#ifndef UFP4_CLI_ARGS_H
#define UFP4_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

/* If argv[*i] is `--name value` or `--name=value`, stores the value, advances *i past it and
 * returns 1; returns -1 (after printing an error) when the value is missing, 0 otherwise. */
int cli_value(int argc, char **argv, int *i, const char *name, const char **value);
/* Is argv[i] exactly the flag `name`? */
int cli_flag(char **argv, int i, const char *name);
int cli_wants_help(int argc, char **argv);

/* Strict numeric parsing: the whole string must be a number in range; prints
 * "ufp4 <cmd>: --flag: ..." and returns -1 on error. */
int cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out);
int cli_parse_size(const char *cmd, const char *flag, const char *s, size_t lo, size_t hi, size_t *out);
int cli_parse_u64(const char *cmd, const char *flag, const char *s, uint64_t *out);
int cli_parse_double(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);

/* Prints "ufp4 <cmd>: <context>: <ufp4_last_error()>" (no context when it is NULL) to stderr and
 * returns 1, the exit status of a failed command, so a call site reads `return cli_error(...)`. */
int cli_error(const char *cmd, const char *context);

/* The command line as typed ("ufp4 " + argv), quoted where a shell would need it; malloc'ed,
 * NULL when out of memory. */
char *cli_command_line(int argc, char **argv);

#endif
