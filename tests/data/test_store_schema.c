/* test_store_schema: a new database gets the current schema (WAL, foreign
 * keys, FTS5); a database at every earlier version migrates forward with its
 * rows kept and searchable; a newer, corrupt or read-only file gives a clear
 * error instead of a crash. */
#include <fcntl.h>
#include <pwd.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store.h"
#include "store_schema.h"
#include "tap.h"

static char dir[] = "/tmp/tern-schema-XXXXXX";

static int sql(sqlite3 *db, const char *q)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, q, NULL, NULL, &msg);
    if (rc != SQLITE_OK) tap_diag("sql: %s: %s", q, msg ? msg : "?");
    sqlite3_free(msg);
    return rc;
}

static long long scalar(sqlite3 *db, const char *q)
{
    sqlite3_stmt *st;
    long long v = -1;
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK) return -2;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static void test_fresh(void)
{
    char path[300], err[512] = "";
    snprintf(path, sizeof path, "%s/fresh.db", dir);
    struct store *s;
    ok(store_open(&s, path, STORE_READWRITE, err, sizeof err) == 0, "fresh open (%s)", err);
    store_close(s);
    sqlite3 *db;
    sqlite3_open(path, &db);
    is_int(scalar(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION, "user_version is current");
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL);
    sqlite3_step(st);
    is_str((const char *)sqlite3_column_text(st, 0), "wal", "journal mode WAL (persistent)");
    sqlite3_finalize(st);
    is_int(scalar(db, "SELECT count(*) FROM sqlite_master WHERE name IN"
                      " ('sessions','messages','requests','runs','messages_fts')"),
           5, "all tables present");
    sql(db, "PRAGMA foreign_keys = ON");
    ok(sqlite3_exec(db, "INSERT INTO messages(session_id, role, text, created_at, updated_at)"
                        " VALUES (12345, 'user', 'x', 0, 0)",
                    NULL, NULL, NULL) != SQLITE_OK,
       "a message needs its session (foreign key)");
    sqlite3_close(db);
}

/* Writes rows that a tern at version v could have written, including a
 * reply left streaming by a killed process. */
static void fill(sqlite3 *db, int v)
{
    sql(db, "INSERT INTO sessions(id, title, model, params, created_at, updated_at)"
            " VALUES (7, 'old chat', 'old.gguf', '{\"max_tokens\":96}', 100, 100)");
    sql(db, "INSERT INTO messages(id, session_id, role, text, status, created_at, updated_at)"
            " VALUES (1, 7, 'user', 'how do platypuses find food', 'ok', 100, 100),"
            " (2, 7, 'assistant', 'By electroreception', 'streaming', 101, 101)");
    /* an edit made after the session was created lived on the request only */
    sql(db, "INSERT INTO requests(message_id, created_at, model, params, status, ttft_s)"
            " VALUES (2, 101, 'old.gguf', '{\"max_tokens\":20}', 'ok', 0.25)");
    if (v >= 3) sql(db, "UPDATE messages SET writer_pid = 999999999 WHERE id = 2");
    sql(db, "INSERT INTO runs(id, kind, model, created_at, config, summary)"
            " VALUES (3, 'bench', 'old.gguf', 100, '{}', '{\"short\":{}}')");
    /* a one-shot `tern run` as a tern before v7 marked it */
    sql(db, "INSERT INTO sessions(id, title, model, params, created_at, updated_at)"
            " VALUES (8, 'hi', 'old.gguf', '{\"source\":\"run\"}', 90, 90)");
}

static void test_migrate_from(int v)
{
    char path[300], err[512] = "";
    snprintf(path, sizeof path, "%s/v%d.db", dir, v);
    sqlite3 *db;
    sqlite3_open(path, &db);
    ok(store_schema_migrate(db, v, path, err, sizeof err) == 0, "build a version %d database", v);
    is_int(scalar(db, "PRAGMA user_version"), v, "it is at that version");
    if (v >= 1) fill(db, v);
    sqlite3_close(db);

    struct store *s;
    ok(store_open(&s, path, STORE_READWRITE, err, sizeof err) == 0, "v%d opens and migrates (%s)",
       v, err);
    if (!s) return;
    struct store_hits h;
    store_search(s, "platypuses", "<", ">", 10, &h, err, sizeof err);
    is_int(h.n, v >= 1 ? 1 : 0, "old text is searchable after migration");
    store_hits_free(&h);
    if (v >= 1) {
        struct store_transcript t;
        is_int(store_transcript(s, 7, &t, err, sizeof err), 0, "old session readable");
        ok(t.n == 2 && strcmp(t.msgs[1].status, "interrupted") == 0 &&
               strcmp(t.msgs[1].text, "By electroreception") == 0,
           "v%d reply left streaming by a dead process is interrupted, text kept", v);
        ok(t.n == 2 && t.msgs[1].req && t.msgs[1].req->ttft_s == 0.25, "old request kept");
        /* from v4 on the session row holds its own parameters */
        const char *want = v < 4 ? "{\"max_tokens\":20}" : "{\"max_tokens\":96}";
        ok(t.session.params_json && strcmp(t.session.params_json, want) == 0,
           "v%d session has %s parameters (%s)", v, v < 4 ? "its newest request's" : "its own",
           t.session.params_json ? t.session.params_json : "NULL");
        ok(t.n == 2 && t.msgs[1].error == NULL, "v%d reply has no error message", v);
        ok(t.session.kind && !strcmp(t.session.kind, "chat"), "v%d chat session is of kind chat", v);
        store_transcript_free(&t);
        /* the marker is a pre-v7 tern's: a v7 file never holds it unconverted */
        if (v < 7) {
            is_int(store_transcript(s, 8, &t, err, sizeof err), 0, "old run readable");
            ok(t.session.kind && !strcmp(t.session.kind, "run") && !t.session.params_json,
               "v%d run marked by its parameters is of kind run, the marker gone (%s)", v,
               t.session.kind ? t.session.kind : "NULL");
            store_transcript_free(&t);
        }
        struct store_runs r;
        ok(store_runs(s, NULL, &r, err, sizeof err) == 0 && r.n == 1 && r.v[0].id == 3 &&
               strcmp(r.v[0].summary_json, "{\"short\":{}}") == 0 && !r.v[0].env_json &&
               !r.v[0].verdict,
           "v%d bench run kept, with no environment or verdict recorded", v);
        store_runs_free(&r);
    }
    store_key k = store_session_new(s, "new", "m", NULL);
    store_message_add(s, k, "user", "platypuses again", -1);
    store_session_new_kind(s, "run", "one-shot", "m", NULL);
    ok(store_flush(s, err, sizeof err) == 0, "migrated v%d database takes writes (%s)", v, err);
    struct store_session_list l;
    int kinds = 0;
    if (store_sessions(s, &l, err, sizeof err) == 0) {
        for (size_t i = 0; i < l.n; i++)
            kinds += !strcmp(l.v[i].title, "new") && !strcmp(l.v[i].kind, "chat") ? 1
                     : !strcmp(l.v[i].title, "one-shot") && !strcmp(l.v[i].kind, "run") ? 2
                                                                                        : 0;
        store_session_list_free(&l);
    }
    is_int(kinds, 3, "new sessions are listed with their kinds (chat, run)");
    store_close(s);
    sqlite3_open(path, &db);
    is_int(scalar(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION, "now at current version");
    sqlite3_close(db);
}

static void test_newer(void)
{
    char path[300], err[512] = "";
    snprintf(path, sizeof path, "%s/newer.db", dir);
    sqlite3 *db;
    sqlite3_open(path, &db);
    sql(db, "CREATE TABLE future(x); PRAGMA user_version = 99");
    sqlite3_close(db);
    struct store *s;
    ok(store_open(&s, path, STORE_READWRITE, err, sizeof err) != 0 && s == NULL,
       "newer schema refused");
    ok(strstr(err, "newer") && strstr(err, path), "message says newer, names the file: %s", err);
}

static void test_corrupt(void)
{
    char path[300], err[512] = "";
    snprintf(path, sizeof path, "%s/corrupt.db", dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 300; i++) fputs("this is not an SQLite file ", f);
    fclose(f);
    struct store *s;
    ok(store_open(&s, path, STORE_READWRITE, err, sizeof err) != 0 && s == NULL,
       "corrupt file refused");
    ok(strstr(err, "not a database") && strstr(err, path), "message says why and where: %s", err);
    ok(store_open(&s, path, STORE_READONLY, err, sizeof err) != 0, "read-only open refused too");
}

/* As root, file modes do not bind: the check runs as 'nobody' in a child. */
static void test_readonly(void)
{
    char path[300], err[512] = "";
    snprintf(path, sizeof path, "%s/ro.db", dir);
    struct store *s;
    if (store_open(&s, path, STORE_READWRITE, err, sizeof err) != 0) {
        ok(0, "create ro.db: %s", err);
        return;
    }
    store_key k = store_session_new(s, "kept", "m", NULL);
    store_message_add(s, k, "user", "read me back", -1);
    store_close(s);
    chmod(path, 0444);
    chmod(dir, 0755);
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        struct passwd *pw = getpwnam("nobody");
        if (geteuid() == 0 && (!pw || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)) _exit(3);
        char e[512] = "";
        int rw = store_open(&s, path, STORE_READWRITE, e, sizeof e);
        if (write(fds[1], e, strlen(e)) < 0) _exit(4);
        int code = rw == 0 ? 1 : 0;
        struct store_session_list l = {0};
        if (store_open(&s, path, STORE_READONLY, e, sizeof e) == 0) {
            if (store_sessions(s, &l, e, sizeof e) != 0 || l.n != 1) code |= 2;
            store_session_list_free(&l);
            store_close(s);
        } else {
            code |= 2;
        }
        _exit(code);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], err, sizeof err - 1);
    err[n > 0 ? n : 0] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 99;
    ok(code != 3, "dropped to an unprivileged user");
    ok(!(code & 1) && strstr(err, "ro.db") && (strstr(err, "read-only") || strstr(err, "ermission")),
       "read-only file: read-write open fails clearly: %s", err);
    ok(code != 3 && !(code & 2), "read-only file: the history still reads (code %d)", code);
    chmod(path, 0600);
    chmod(dir, 0700);
}

int main(void)
{
    if (!mkdtemp(dir)) return tap_bail("mkdtemp failed");
    test_fresh();
    for (int v = 0; v < STORE_SCHEMA_VERSION; v++) test_migrate_from(v);
    test_newer();
    test_corrupt();
    test_readonly();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", dir);
    return tap_done();
}
