/* store_schema: the history database's schema versions and the forward
 * migrations between them (PRAGMA user_version). Internal to the store; the
 * tests use it to build databases at every earlier version. */
#ifndef TERN_STORE_SCHEMA_H
#define TERN_STORE_SCHEMA_H

#include <sqlite3.h>
#include <stddef.h>

/* The version a current tern writes. */
#define STORE_SCHEMA_VERSION 9

/* Brings db from its user_version up to `target` (1..STORE_SCHEMA_VERSION),
 * each step in its own transaction. A database newer than this tern is an
 * error (an older tern must not write to it). Returns 0 or -1 with a message. */
int store_schema_migrate(sqlite3 *db, int target, const char *path, char *err, size_t errlen);
/* The user_version, or -1 with a message (e.g. "file is not a database"). */
int store_schema_version(sqlite3 *db, const char *path, char *err, size_t errlen);

#endif
