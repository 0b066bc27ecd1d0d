/* engine_cache: the local engine's prompt cache beyond the KV pool. Each
 * finished request's computed prefix is remembered (the last ENGINE_RECENT,
 * a conversation's next turn replacing its previous one); at close or on
 * engine_cache_save their resident blocks are written to the disk cache
 * (kvdisk.h), and a waiting prompt that begins with a saved prefix longer
 * than what the pool holds gets those blocks loaded and registered before
 * its admission, which then reuses them like any cached prefix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"
#include "model.h"

#define HEAD_TOKENS 32

static void publish_disk(struct engine_local *e);

static uint64_t mix(uint64_t h, uint64_t v)
{
    return kvd_hash(&v, sizeof v, h);
}

void engine_cache_open(struct engine_local *e)
{
    const struct engine_config *c = &e->cfg;
    if (!c->kv_disk_dir || !c->model_path || !e->be->ops->kv_block_io) return;
    struct kvd_ident id = {0};
    id.model = kvd_file_identity(c->model_path);
    if (!id.model) return;
    /* Tokenizer and template: the pieces, the specials, the family. */
    uint64_t h = 0x746f6bULL;
    if (e->tok) {
        int32_t nv = tok_n_vocab(e->tok);
        h = mix(h, (uint64_t)nv);
        for (int32_t i = 0; i < nv; i++) {
            const char *p = tok_piece(e->tok, i);
            h = kvd_hash(p ? p : "", p ? strlen(p) : 0, h + (uint64_t)i);
        }
        h = mix(h, (uint64_t)(uint32_t)tok_bos(e->tok) << 32 | (uint32_t)tok_eos(e->tok));
        h = mix(h, (uint64_t)tok_adds_bos(e->tok));
    }
    if (e->has_tmpl) h = mix(h, (uint64_t)e->tmpl.family * 2 + e->tmpl.phi3_v1);
    if (c->chat_template) h = kvd_hash(c->chat_template, strlen(c->chat_template), h);
    id.tok = h;
    const struct model_hparams *hp = &e->model->hp;
    uint64_t l = kvd_hash(e->binfo.name, strlen(e->binfo.name), 0x6c6179);
    l = mix(l, (uint64_t)hp->n_layer);
    l = mix(l, (uint64_t)hp->n_head_kv << 32 | (uint32_t)hp->head_dim);
    l = mix(l, e->be->kv_bytes_per_token);
    id.layout = l;
    id.kv_type = (uint32_t)c->backend.kv_type;
    id.block_tokens = (uint32_t)e->kv.block_tokens;
    id.block_bytes = e->be->kv_bytes_per_token * (uint64_t)e->kv.block_tokens;
    char err[256];
    uint64_t cap = c->kv_disk_cap ? c->kv_disk_cap : 2ull << 30;
    if (kvd_open(&e->kvd, c->kv_disk_dir, cap, &id, c->kv_disk_log, err, sizeof err) != 0) {
        if (c->kv_disk_log) fprintf(c->kv_disk_log, "%s; the prompt cache stays in memory\n", err);
        return;
    }
    e->kvd_on = true;
    publish_disk(e);
}

void engine_cache_close(struct engine_local *e)
{
    if (e->kvd_on) kvd_close(&e->kvd);
    e->kvd_on = false;
    for (int32_t i = 0; i < e->n_recent; i++) free(e->recent[i].tokens);
    e->n_recent = 0;
    free(e->pub_disk);
    free(e->pub_disk_head);
    e->pub_disk = NULL;
    e->pub_disk_head = NULL;
    e->n_pub_disk = 0;
}

/* The disk index as the listing shows it (lock held). */
static void publish_disk(struct engine_local *e)
{
    e->n_pub_disk = 0;
    if (!e->kvd_on || e->kvd.n == 0) return;
    struct engine_cache_entry *np = realloc(e->pub_disk, (size_t)e->kvd.n * sizeof *np);
    if (!np) return;
    e->pub_disk = np;
    int32_t *nh = realloc(e->pub_disk_head, (size_t)e->kvd.n * HEAD_TOKENS * sizeof *nh);
    if (!nh) return;
    e->pub_disk_head = nh;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    for (int32_t i = 0; i < e->kvd.n; i++) {
        const struct kvd_entry *k = &e->kvd.e[i];
        struct engine_cache_entry *o = &np[i];
        memset(o, 0, sizeof *o);
        o->on_disk = true;
        o->hash = k->h.prefix_hash;
        o->tokens = k->n_tokens;
        o->bytes = k->bytes;
        o->hits = k->hits;
        o->age_s = now - (double)k->h.created;
        o->idle_s = now - k->used;
        snprintf(o->made_by, sizeof o->made_by, "%s", k->h.tag);
        o->usable = k->h.id.model == e->kvd.id.model && k->h.id.tok == e->kvd.id.tok &&
                    k->h.id.layout == e->kvd.id.layout && k->h.id.kv_type == e->kvd.id.kv_type &&
                    k->h.id.block_tokens == e->kvd.id.block_tokens &&
                    k->h.id.block_bytes == e->kvd.id.block_bytes;
        int32_t *head = nh + (size_t)i * HEAD_TOKENS;
        for (int32_t j = 0; j < HEAD_TOKENS; j++) head[j] = j < k->n_tokens ? k->tokens[j] : -1;
    }
    e->n_pub_disk = e->kvd.n;
}

void engine_cache_publish(struct engine_local *e)
{
    /* Walking every recent prefix's blocks costs up to a millisecond at long
     * contexts: at most once a second, not at every step. */
    double now = engine_now(e);
    if (e->n_recent == 0 || now - e->recent_checked < 1.0) return;
    e->recent_checked = now;
    int32_t dummy;
    for (int32_t i = 0; i < e->n_recent; i++) {
        struct engine_recent *r = &e->recent[i];
        r->resident = kv_peek_match(&e->kv, r->tokens, r->n, &dummy);
    }
}

void engine_cache_record(struct engine_local *e, struct engine_req *r)
{
    const struct sched_seq *q = &r->seq;
    if (r->embed || !q->tokens) return;
    const int32_t bt = e->kv.block_tokens;
    int32_t n = q->n_computed / bt * bt;
    if (n < bt) return;
    double now = engine_now(e);
    /* The conversation's previous turn (a prefix of this one) is replaced. */
    int32_t slot = -1;
    uint32_t hits = 0;
    double made = now;
    for (int32_t i = 0; i < e->n_recent; i++) {
        struct engine_recent *o = &e->recent[i];
        if (o->n <= n && memcmp(o->tokens, q->tokens, (size_t)o->n * sizeof *o->tokens) == 0) {
            slot = i;
            hits = o->hits + (q->n_cached >= o->n / 2);
            made = o->t_made;
            break;
        }
        if (o->n >= n && memcmp(o->tokens, q->tokens, (size_t)n * sizeof *o->tokens) == 0) {
            o->t_used = now; /* already known, and longer */
            o->hits += q->n_cached > 0;
            return;
        }
    }
    if (slot < 0) {
        if (e->n_recent < ENGINE_RECENT) slot = e->n_recent++;
        else { /* replace the least recently used */
            slot = 0;
            for (int32_t i = 1; i < e->n_recent; i++)
                if (e->recent[i].t_used < e->recent[slot].t_used) slot = i;
        }
    }
    int32_t *t = malloc((size_t)n * sizeof *t);
    if (!t) return;
    memcpy(t, q->tokens, (size_t)n * sizeof *t);
    struct engine_recent *o = &e->recent[slot];
    free(o->tokens);
    memset(o, 0, sizeof *o);
    o->tokens = t;
    o->n = n;
    o->resident = n;
    o->hash = kvd_tokens_hash(t, n);
    o->t_made = made;
    o->t_used = now;
    o->hits = hits;
    if (r->trace_id) snprintf(o->made_by, sizeof o->made_by, "%s", r->trace_id);
    else snprintf(o->made_by, sizeof o->made_by, "request %llu", (unsigned long long)r->id);
}

/* ---- restore ------------------------------------------------------------------ */

static void restore_one(struct engine_local *e, struct sched_seq *q)
{
    struct kv *kv = &e->kv;
    const int32_t bt = kv->block_tokens;
    /* As admission does: the last token is always computed; a scored
     * sequence needs every row from score_from on. */
    int32_t lim = q->score && q->score_from < q->n_tokens - 1 ? q->score_from : q->n_tokens - 1;
    int32_t dummy;
    int32_t mem = kv_peek_match(kv, q->tokens, lim, &dummy);
    int32_t got;
    int32_t i = kvd_find(&e->kvd, q->tokens, lim, ENGINE_DISK_MIN_TOKENS, &got);
    if (i < 0 || got <= mem) return;
    const int32_t nb = got / bt;
    /* Only when the rest of the prompt still fits beside it. */
    if (kv_blocks_for(kv, q->n_tokens) > kv_available(kv)) return;
    void *blocks = NULL;
    if (kvd_load(&e->kvd, i, &blocks) != 0) return;
    bool *fresh = malloc((size_t)nb * sizeof *fresh);
    struct kv_seq tmp;
    kv_seq_init(&tmp);
    if (fresh && kv_seq_adopt(kv, &tmp, q->tokens, nb, fresh) == 0) {
        const uint64_t bb = e->kvd.id.block_bytes;
        struct engine_req *r = q->ud;
        for (int32_t k = 0; k < nb; k++)
            if (fresh[k]) {
                /* A block the backend could not write holds stale K/V: it and
                 * the blocks chained after it must never be matched. */
                if (e->be->ops->kv_block_io(e->be, tmp.blocks[k], (char *)blocks + k * bb, true)
                    != 0) {
                    kv_seq_unadopt(kv, &tmp, k);
                    if (e->cfg.kv_disk_log)
                        fprintf(e->cfg.kv_disk_log,
                                "tern: disk prompt cache: the backend refused block %d of %d; "
                                "the rest is prefilled\n", k, nb);
                    break;
                }
                r->m.n_restored += bt;
            }
        kvd_touch(&e->kvd, i);
        e->kvd.restores++;
    }
    kv_seq_free(kv, &tmp); /* cached now: the admission shares them */
    free(fresh);
    free(blocks);
}

void engine_cache_restore(struct engine_local *e)
{
    if (!e->kvd_on) return;
    bool any = false;
    for (int32_t j = 0; j < e->sched.n_waiting; j++) {
        struct sched_seq *q = e->sched.waiting[j];
        struct engine_req *r = q->ud;
        if (r->cache_checked) continue;
        r->cache_checked = true;
        if (r->embed || q->n_preempted > 0) continue;
        uint64_t before = e->kvd.restores + e->kvd.n_notes;
        restore_one(e, q);
        any |= e->kvd.restores + e->kvd.n_notes != before;
    }
    if (any) {
        pthread_mutex_lock(&e->mu);
        publish_disk(e);
        pthread_mutex_unlock(&e->mu);
    }
}

/* ---- save --------------------------------------------------------------------- */

struct save_ctx {
    struct backend *be;
    const int32_t *blocks;
};

static int get_block(void *ud, int32_t k, void *buf)
{
    struct save_ctx *s = ud;
    return s->be->ops->kv_block_io(s->be, s->blocks[k], buf, false);
}

int engine_cache_save_now(struct engine_local *e, char *err, size_t errlen)
{
    if (!e->kvd_on) {
        snprintf(err, errlen, "no disk prompt cache (off, or the backend cannot read its KV)");
        return -1;
    }
    int saved = 0;
    for (int32_t i = 0; i < e->n_recent; i++) {
        const struct engine_recent *r = &e->recent[i];
        /* A prefix of another recent one is saved as part of that. */
        bool covered = false;
        for (int32_t j = 0; j < e->n_recent && !covered; j++)
            covered = j != i && e->recent[j].n > r->n &&
                      memcmp(e->recent[j].tokens, r->tokens, (size_t)r->n * sizeof *r->tokens) == 0;
        if (covered) continue;
        int32_t *ids = malloc((size_t)(r->n / e->kv.block_tokens + 1) * sizeof *ids);
        if (!ids) continue;
        int32_t n = kv_prefix_blocks(&e->kv, r->tokens, r->n, ids);
        if (n >= ENGINE_DISK_MIN_TOKENS) {
            struct save_ctx s = {e->be, ids};
            if (kvd_save(&e->kvd, r->tokens, n / e->kv.block_tokens, r->made_by, get_block, &s,
                         err, errlen) == 0)
                saved++;
            else if (e->cfg.kv_disk_log) fprintf(e->cfg.kv_disk_log, "%s\n", err);
        }
        free(ids);
    }
    pthread_mutex_lock(&e->mu);
    publish_disk(e);
    pthread_mutex_unlock(&e->mu);
    return saved;
}

int engine_local_cache_save(struct engine *base, char *err, size_t errlen)
{
    struct engine_local *e = engine_local_of(base);
    pthread_mutex_lock(&e->mu);
    if (!e->kvd_on) {
        pthread_mutex_unlock(&e->mu);
        snprintf(err, errlen, "no disk prompt cache (off, or the backend cannot read its KV)");
        return -1;
    }
    /* The engine thread owns the pool: it saves between steps. */
    e->kvd_save_req = true;
    pthread_cond_broadcast(&e->work_cond);
    while (e->kvd_save_req) pthread_cond_wait(&e->ev_cond, &e->mu);
    int rc = e->kvd_save_rc;
    if (rc < 0) snprintf(err, errlen, "%s", e->kvd_save_err);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* ---- listing ------------------------------------------------------------------ */

static void head_text(const struct engine_local *e, const int32_t *t, int32_t n, char *out,
                      size_t cap)
{
    out[0] = 0;
    if (!e->tok) return;
    size_t len = 0;
    for (int32_t i = 0; i < n && t[i] >= 0 && len + 1 < cap; i++) {
        char piece[128];
        size_t k = tok_decode_token_special(e->tok, t[i], piece, sizeof piece);
        if (k > sizeof piece) k = sizeof piece;
        if (len + k >= cap) break;
        memcpy(out + len, piece, k);
        len += k;
    }
    out[len] = 0;
}

int engine_local_cache_list(struct engine *base, struct engine_cache_entry *out, int max,
                            bool with_text)
{
    struct engine_local *e = engine_local_of(base);
    pthread_mutex_lock(&e->mu);
    double now = engine_now(e);
    int n = 0;
    for (int32_t i = 0; i < e->n_recent && n < max; i++) {
        const struct engine_recent *r = &e->recent[i];
        if (r->resident <= 0) continue;
        struct engine_cache_entry *o = &out[n++];
        memset(o, 0, sizeof *o);
        o->hash = r->hash;
        o->tokens = r->resident;
        o->bytes = (uint64_t)r->resident * e->be->kv_bytes_per_token;
        o->hits = r->hits;
        o->age_s = now - r->t_made;
        o->idle_s = now - r->t_used;
        o->usable = true;
        snprintf(o->made_by, sizeof o->made_by, "%s", r->made_by);
        if (with_text) head_text(e, r->tokens, r->n < HEAD_TOKENS ? r->n : HEAD_TOKENS, o->text,
                                 sizeof o->text);
    }
    for (int32_t i = 0; i < e->n_pub_disk && n < max; i++) {
        out[n] = e->pub_disk[i];
        if (with_text) head_text(e, e->pub_disk_head + (size_t)i * HEAD_TOKENS, HEAD_TOKENS,
                                 out[n].text, sizeof out[n].text);
        n++;
    }
    pthread_mutex_unlock(&e->mu);
    return n;
}
