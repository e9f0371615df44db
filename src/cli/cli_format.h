/*
 * cli_format.h: the tokitai-jit command's output, shared by its commands:
 * messages on stderr, sizes and times, JSON strings, colour, "label
 * value" lines and aligned tables (cli_format.c).
 */
#ifndef TJ_CLI_FORMAT_H
#define TJ_CLI_FORMAT_H

#include <stdint.h>
#include <stdio.h>

#include "cli_options.h"

/* "tokitai-jit: " and the message on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void cli_format_size(uint64_t bytes, char *buf, size_t len); /* "1.2 MiB" */
void cli_format_ms(double ms, char *buf, size_t len);        /* "850 ms" */
void cli_format_time(int64_t unix_seconds, char *buf, size_t len);
/* s as a JSON string literal, quotes included; bytes that are not UTF-8
 * become U+FFFD so that the output always parses. */
void cli_json_string(FILE *f, const char *s);
/* ", "name": " and value as cli_json_string writes it: an object's next
 * member. */
void cli_json_member(FILE *f, const char *name, const char *value);
/* s (NULL: "") for a terminal: control characters and bytes that are not
 * UTF-8 as \xNN.  cli_text: malloc'd, NULL without memory; cli_text_in:
 * into buf (cut to len), which it returns.  Every stored string a text
 * listing prints goes through one of them (table cells do). */
char *cli_text(const char *s);
const char *cli_text_in(char *buf, size_t len, const char *s);
/* value as cli_json_string writes it, or null when value is NULL. */
void cli_json_string_or_null(FILE *f, const char *value);

/* sgr (one of the STYLE_ sequences) when colour is on, else "". */
#define STYLE_BOLD "\033[1m"
#define STYLE_RED "\033[31m"
#define STYLE_GREEN "\033[32m"
#define STYLE_RESET "\033[0m"
const char *cli_style(const cli_options *o, const char *sgr);

/* "label            value" lines for --stats and --info. */
void cli_field(const char *label, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A table of strings printed with aligned columns. */
typedef struct cli_table cli_table;
/* align: one 'l' or 'r' per column. */
cli_table *cli_table_new(int ncols, const char *const *headers,
                         const char *align);
int cli_table_add(cli_table *t, const char *const *cells); /* copies */
/* On a terminal narrower than the table, column `shrink` is cut to fit. */
void cli_table_print(const cli_table *t, const cli_options *o, int shrink);
void cli_table_free(cli_table *t);

#endif
