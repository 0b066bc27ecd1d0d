/* store_schema: the history schema, one SQL script per version step. A step
 * never changes once released: new needs get a new step, so every database
 * ever written can be brought forward (tests/data/test_store_schema.c
 * migrates from each earlier version). docs/SCHEMA.md describes the result. */
#include "store_schema.h"

#include <stdio.h>

/* v1: the four tables. Times are unix seconds (REAL), durations seconds. */
static const char step1[] =
    "CREATE TABLE sessions ("
    "  id INTEGER PRIMARY KEY,"
    "  title TEXT NOT NULL DEFAULT '',"
    "  model TEXT,"
    "  params TEXT,"                 /* generation parameters, JSON object */
    "  created_at REAL NOT NULL,"
    "  updated_at REAL NOT NULL);"
    "CREATE TABLE messages ("
    "  id INTEGER PRIMARY KEY,"
    "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    "  role TEXT NOT NULL CHECK (role IN ('system','user','assistant')),"
    "  text TEXT NOT NULL DEFAULT '',"
    "  n_tokens INTEGER,"
    "  status TEXT NOT NULL DEFAULT 'ok'," /* ok streaming interrupted cancelled error */
    "  created_at REAL NOT NULL,"
    "  updated_at REAL NOT NULL);"
    "CREATE INDEX messages_by_session ON messages(session_id, id);"
    "CREATE TABLE requests ("
    "  id INTEGER PRIMARY KEY,"
    "  message_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,"
    "  created_at REAL NOT NULL,"
    "  model TEXT, model_file TEXT, model_hash TEXT, backend TEXT,"
    "  params TEXT,"                 /* sampling parameters, JSON object */
    "  status TEXT NOT NULL,"
    "  queue_s REAL, prefill_s REAL, ttft_s REAL, tpot_s REAL, decode_s REAL, e2e_s REAL,"
    "  prompt_tokens INTEGER, cached_tokens INTEGER, generated_tokens INTEGER);"
    "CREATE INDEX requests_by_message ON requests(message_id);"
    "CREATE TABLE runs ("
    "  id INTEGER PRIMARY KEY,"
    "  kind TEXT NOT NULL,"          /* bench eval-perplexity eval-prompts */
    "  model TEXT,"
    "  created_at REAL NOT NULL,"
    "  config TEXT, summary TEXT);"; /* JSON objects */

/* v2: full-text search over message text. External content (no second copy
 * of the text); triggers keep it in step, including each streamed update. */
static const char step2[] =
    "CREATE VIRTUAL TABLE messages_fts USING fts5("
    "  text, content='messages', content_rowid='id',"
    "  tokenize='unicode61 remove_diacritics 2');"
    "CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN"
    "  INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text); END;"
    "CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN"
    "  INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);"
    "  END;"
    "CREATE TRIGGER messages_fts_au AFTER UPDATE OF text ON messages BEGIN"
    "  INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);"
    "  INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text); END;"
    "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');";

/* v3: which process streams a reply, so an open marks interrupted only the
 * replies of dead processes (not those of a TUI still running beside it);
 * and an index for per-model statistics. Rows from v2 have no writer: a
 * reply left streaming by a v2 tern is interrupted. */
static const char step3[] =
    "ALTER TABLE messages ADD COLUMN writer_pid INTEGER;"
    "CREATE INDEX requests_by_model ON requests(model, created_at);";

/* v4: a session's parameters are kept on its row (store_session_set_params).
 * Before, edits made after a session was created lived only on its reply
 * requests: carry the newest of those onto the session. */
static const char step4[] =
    "UPDATE sessions SET params = ("
    "  SELECT r.params FROM requests r JOIN messages m ON m.id = r.message_id"
    "  WHERE m.session_id = sessions.id AND r.params IS NOT NULL ORDER BY r.id DESC LIMIT 1)"
    " WHERE EXISTS (SELECT 1 FROM requests r JOIN messages m ON m.id = r.message_id"
    "  WHERE m.session_id = sessions.id AND r.params IS NOT NULL);";

/* v5: a failed reply keeps why it failed (rejected, error, timeout: the
 * engine's message), so a reopened session shows the error, not a blank. */
static const char step5[] = "ALTER TABLE messages ADD COLUMN error TEXT;";

/* v6: a bench or contract run keeps the environment it ran in (tern and
 * engine versions, model and tokenizer hashes, batching policy, threads,
 * ISA, GPU: JSON object) and a contract run its verdict ("pass", "fail"),
 * so 'tern bench compare' can say what changed between two runs. */
static const char step6[] =
    "ALTER TABLE runs ADD COLUMN env TEXT;"
    "ALTER TABLE runs ADD COLUMN verdict TEXT;";

/* v7: a session's kind: 'chat' (the chat's sessions) or 'run' (one-shot
 * `tern run` exchanges, which the chat's session list leaves out). Before,
 * a run was marked by parameters of exactly {"source":"run"}. */
static const char step7[] =
    "ALTER TABLE sessions ADD COLUMN kind TEXT NOT NULL DEFAULT 'chat'"
    "  CHECK (kind IN ('chat', 'run'));"
    "UPDATE sessions SET kind = 'run', params = NULL WHERE params = '{\"source\":\"run\"}';";

/* v8: a request's fallback route (issue 37): the target that served it and
 * each move before that, JSON; NULL when it had no route. */
static const char step8[] = "ALTER TABLE requests ADD COLUMN route TEXT;";
/* v9: a reply's thinking timed apart from its answer (the TUI's fold). */
static const char step9[] =
    "ALTER TABLE requests ADD COLUMN think_s REAL;"
    "ALTER TABLE requests ADD COLUMN think_tokens INTEGER;";

static const char *const steps[STORE_SCHEMA_VERSION] = {step1, step2, step3, step4,
                                                        step5, step6, step7, step8, step9};

int store_schema_version(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    int v = -1;
    int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    else
        snprintf(err, errlen, "%s: %s (not a tern history database, or damaged)", path,
                 sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return v;
}

static int run_step(sqlite3 *db, int to, const char *path, char *err, size_t errlen)
{
    char *msg = NULL;
    char sql[64];
    /* IMMEDIATE: two processes opening an old file at once must not both
     * migrate it; the loser re-reads the version inside its transaction. */
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK) goto fail;
    int v = store_schema_version(db, path, err, errlen);
    if (v < 0) goto rollback;
    if (v >= to) return sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
    if (sqlite3_exec(db, steps[to - 1], NULL, NULL, &msg) != SQLITE_OK) goto fail_rb;
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", to);
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) goto fail_rb;
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) goto fail_rb;
    return 0;
fail_rb:
    snprintf(err, errlen, "%s: migrating the schema to version %d: %s", path, to,
             msg ? msg : sqlite3_errmsg(db));
rollback:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_free(msg);
    return -1;
fail:
    snprintf(err, errlen, "%s: migrating the schema to version %d: %s", path, to,
             msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    return -1;
}

int store_schema_migrate(sqlite3 *db, int target, const char *path, char *err, size_t errlen)
{
    int v = store_schema_version(db, path, err, errlen);
    if (v < 0) return -1;
    if (v > STORE_SCHEMA_VERSION) {
        snprintf(err, errlen,
                 "%s: schema version %d is newer than this tern understands (%d); "
                 "use a newer tern",
                 path, v, STORE_SCHEMA_VERSION);
        return -1;
    }
    for (int to = v + 1; to <= target; to++)
        if (run_step(db, to, path, err, errlen) != 0) return -1;
    return 0;
}
