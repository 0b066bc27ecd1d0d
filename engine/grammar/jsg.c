/* jsg: JSON Schema compiler and byte matcher (jsg.h).
 *
 * The schema becomes a graph of nodes: OBJECT, ARRAY, STRING, NUMBER,
 * LITERAL (a sorted set of exact texts: enum, const, true/false/null, and an
 * object's possible next keys), ANYOF and REF (a $ref, resolved lazily so
 * that recursive schemas work). A matcher stack holds one frame per open
 * value; a value is pushed when its first byte arrives, and an ANYOF forks
 * the stack there, one per alternative (the state is a set of stacks).
 * Numbers and literals that may go on ("1" before "12") end lazily: the
 * first byte they cannot take pops them and goes to the parent. */
#include "jsg.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { K_OBJECT, K_ARRAY, K_STRING, K_NUMBER, K_LITERAL, K_ANYOF, K_REF };

struct node {
    uint8_t kind;
    uint8_t integer;   /* K_NUMBER: no fraction or exponent */
    int32_t a, b, c, d;
    /* K_OBJECT: a = first prop, b = n props, c = value node of undeclared keys
     *           (-1 none; only without declared properties), d = first keyset
     *           node (keyset of start index i is node d + i)
     * K_ARRAY:  a = items node, b = minItems, c = maxItems (-1 none), d = count bound
     * K_LITERAL: a = first entry in lits, b = entries (sorted by text)
     * K_ANYOF:  a = first entry in alts, b = entries
     * K_REF:    a = target node (-1 until resolved) */
};

struct prop {
    int32_t value;     /* node */
    int32_t req_from;  /* first required property index >= this one (n: none) */
    int32_t key;       /* offset of the key's JSON text ("name" with quotes) in text */
    int32_t key_len;
    bool required;
};

struct lit {
    int32_t off, len;  /* in text */
    int32_t tag;       /* object keysets: the property index */
};

struct jsg {
    struct node *nodes;
    int32_t n_nodes, cap_nodes;
    struct prop *props;
    int32_t n_props, cap_props;
    struct lit *lits;
    int32_t n_lits, cap_lits;
    int32_t *alts;
    int32_t n_alts, cap_alts;
    char *text;
    int32_t n_text, cap_text;
    int32_t root;
    int32_t any_key;   /* node: a string (map keys; node 0) */
};

/* ---- growable tables ----------------------------------------------------------- */

static int grow(void **p, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap) return 0;
    int32_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *np = realloc(*p, (size_t)c * elem);
    if (!np) return -1;
    *p = np;
    *cap = c;
    return 0;
}

static int32_t new_node(struct jsg *g, uint8_t kind)
{
    if (g->n_nodes >= JSG_MAX_NODES) return -1;
    if (grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes)) return -1;
    g->nodes[g->n_nodes] = (struct node){.kind = kind, .c = -1};
    return g->n_nodes++;
}

static int32_t add_text(struct jsg *g, const char *s, size_t n)
{
    if (n > (size_t)INT32_MAX / 4 || (size_t)g->n_text + n > (size_t)INT32_MAX / 2) return -1;
    if (grow((void **)&g->text, &g->cap_text, g->n_text + (int32_t)n + 1, 1)) return -1;
    int32_t off = g->n_text;
    memcpy(g->text + off, s, n);
    g->n_text += (int32_t)n;
    return off;
}

static int add_lit(struct jsg *g, int32_t off, int32_t len, int32_t tag)
{
    if (grow((void **)&g->lits, &g->cap_lits, g->n_lits + 1, sizeof *g->lits)) return -1;
    g->lits[g->n_lits++] = (struct lit){off, len, tag};
    return 0;
}

/* qsort has no context argument: the text pool being sorted against is set
 * here for the duration of one sort (the compile runs on one thread). */
static _Thread_local const char *sort_text;

static int cmp_lit(const void *x, const void *y)
{
    const struct lit *a = x, *b = y;
    int32_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(sort_text + a->off, sort_text + b->off, (size_t)n);
    if (c) return c;
    return (a->len > b->len) - (a->len < b->len);
}

static void sort_lits(struct jsg *g, int32_t from, int32_t n)
{
    sort_text = g->text;
    qsort(g->lits + from, (size_t)n, sizeof *g->lits, cmp_lit);
    sort_text = NULL;
}

/* ---- compile ------------------------------------------------------------------- */

struct refmap {
    char *path;
    int32_t node;
};

struct cctx {
    struct jsg *g;
    const cJSON *root;
    struct refmap *refs;
    int32_t n_refs, cap_refs;
    char *err;
    size_t errlen;
    int32_t any_value;  /* node: any JSON value (-1 until built) */
};

static int fail(struct cctx *c, const char *path, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(c->err, c->errlen, "%s: ", path[0] ? path : "#");
    if (n < 0 || (size_t)n >= c->errlen) return -1;
    va_start(ap, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static int oom(struct cctx *c, const char *path)
{
    if (c->g->n_nodes >= JSG_MAX_NODES)
        return fail(c, path, "schema too large: more than %d grammar nodes", JSG_MAX_NODES);
    return fail(c, path, "out of memory compiling the schema");
}

/* Keywords that only annotate (never constrain) the value. */
static const char *const annotations[] = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "strict", NULL,
};
/* Keywords that constrain and are enforced here. */
static const char *const enforced[] = {
    "type", "properties", "required", "additionalProperties", "items", "minItems",
    "maxItems", "enum", "const", "anyOf", "$ref", "minLength", "maxLength", NULL,
};

static bool in_list(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (strcmp(*l, s) == 0) return true;
    return false;
}

static int32_t compile(struct cctx *c, const cJSON *s, const char *path, int depth);

static void sub_path(char *out, size_t cap, const char *path, const char *a, const char *b)
{
    if (b) snprintf(out, cap, "%s/%s/%s", path, a, b);
    else snprintf(out, cap, "%s/%s", path, a);
}

static int32_t literal_node(struct cctx *c, const cJSON *values, int n, const char *path)
{
    struct jsg *g = c->g;
    int32_t id = new_node(g, K_LITERAL);
    if (id < 0) return oom(c, path);
    int32_t first = g->n_lits;
    for (const cJSON *v = values; v && n > 0; v = v->next, n--) {
        char *t = cJSON_PrintUnformatted(v);
        if (!t) return oom(c, path);
        int32_t off = add_text(g, t, strlen(t));
        int32_t len = (int32_t)strlen(t);
        free(t);
        if (off < 0 || add_lit(g, off, len, 0) != 0) return oom(c, path);
    }
    int32_t cnt = g->n_lits - first;
    sort_lits(g, first, cnt);
    /* equal texts once only: the matcher narrows ranges by prefix */
    int32_t k = 0;
    for (int32_t i = 0; i < cnt; i++) {
        struct lit *l = &g->lits[first + i];
        if (k > 0) {
            struct lit *p = &g->lits[first + k - 1];
            if (p->len == l->len && memcmp(g->text + p->off, g->text + l->off, (size_t)l->len) == 0)
                continue;
        }
        g->lits[first + k++] = *l;
    }
    g->n_lits = first + k;
    g->nodes[id].a = first;
    g->nodes[id].b = k;
    if (k > UINT16_MAX) return fail(c, path, "more than %d enum values", UINT16_MAX);
    return id;
}

/* A literal set from a JSON array text of the values ("[true,false]"). */
static int32_t words_literal(struct cctx *c, const char *json, const char *path)
{
    cJSON *w = cJSON_Parse(json);
    int32_t id = w ? literal_node(c, w->child, cJSON_GetArraySize(w), path) : oom(c, path);
    cJSON_Delete(w);
    return id;
}

static int32_t anyof_node(struct cctx *c, const int32_t *alts, int32_t n, const char *path)
{
    struct jsg *g = c->g;
    int32_t id = new_node(g, K_ANYOF);
    if (id < 0 || grow((void **)&g->alts, &g->cap_alts, g->n_alts + n, sizeof *g->alts))
        return oom(c, path);
    g->nodes[id].a = g->n_alts;
    g->nodes[id].b = n;
    memcpy(g->alts + g->n_alts, alts, (size_t)n * sizeof *alts);
    g->n_alts += n;
    return id;
}

static int32_t any_value(struct cctx *c, const char *path);

/* {"type":"object"}: declared properties in order, or a map when none. */
static int32_t object_node(struct cctx *c, const cJSON *s, const char *path, int depth)
{
    struct jsg *g = c->g;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    char p[512];
    if (props && !cJSON_IsObject(props)) return fail(c, path, "'properties' must be an object");
    if (req && !cJSON_IsArray(req)) return fail(c, path, "'required' must be an array");
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl))
        return fail(c, path, "'additionalProperties' must be a boolean or a schema");
    int n = props ? cJSON_GetArraySize(props) : 0;
    if (n > 1024) return fail(c, path, "more than 1024 properties");
    const cJSON *r;
    cJSON_ArrayForEach(r, req) {
        if (!cJSON_IsString(r)) return fail(c, path, "'required' must hold strings");
        if (!cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            return fail(c, path, "'required' names '%.64s', which is not in 'properties'",
                        r->valuestring);
    }
    int32_t id = new_node(g, K_OBJECT);
    if (id < 0) return oom(c, path);
    int32_t first = g->n_props;
    if (grow((void **)&g->props, &g->cap_props, g->n_props + n, sizeof *g->props))
        return oom(c, path);
    g->n_props += n;
    int i = 0;
    const cJSON *pr;
    cJSON_ArrayForEach(pr, props) {
        sub_path(p, sizeof p, path, "properties", pr->string);
        if (!cJSON_IsObject(pr) && !cJSON_IsBool(pr))
            return fail(c, p, "a property's schema must be an object");
        int32_t v = compile(c, pr, p, depth + 1);
        if (v < 0) return -1;
        cJSON *ks = cJSON_CreateString(pr->string);
        char *key = ks ? cJSON_PrintUnformatted(ks) : NULL;
        cJSON_Delete(ks);
        if (!key) return oom(c, p);
        int32_t off = add_text(g, key, strlen(key));
        int32_t klen = (int32_t)strlen(key);
        free(key);
        if (off < 0) return oom(c, p);
        bool required = false;
        cJSON_ArrayForEach(r, req) required |= strcmp(r->valuestring, pr->string) == 0;
        g->props[first + i] = (struct prop){.value = v, .key = off, .key_len = klen,
                                            .required = required};
        i++;
    }
    int32_t next_req = n;
    for (int k = n - 1; k >= 0; k--) {
        if (g->props[first + k].required) next_req = k;
        g->props[first + k].req_from = next_req;
    }
    int32_t map = -1;
    if (n == 0 && !(addl && cJSON_IsFalse(addl))) {
        if (addl && cJSON_IsObject(addl)) {
            sub_path(p, sizeof p, path, "additionalProperties", NULL);
            map = compile(c, addl, p, depth + 1);
        } else {
            map = any_value(c, path);
        }
        if (map < 0) return -1;
    }
    /* keysets: from start index k, the keys of k .. the first required one */
    int32_t ks0 = g->n_nodes;
    for (int k = 0; k < n; k++) {
        int32_t kid = new_node(g, K_LITERAL);
        if (kid < 0) return oom(c, path);
        int32_t last = g->props[first + k].req_from < n ? g->props[first + k].req_from : n - 1;
        int32_t l0 = g->n_lits;
        for (int32_t j = k; j <= last; j++)
            if (add_lit(g, g->props[first + j].key, g->props[first + j].key_len, j) != 0)
                return oom(c, path);
        sort_lits(g, l0, g->n_lits - l0);
        g->nodes[kid].a = l0;
        g->nodes[kid].b = g->n_lits - l0;
    }
    struct node *o = &g->nodes[id];
    o->a = first;
    o->b = n;
    o->c = map;
    o->d = ks0;
    return id;
}

static int get_count(struct cctx *c, const cJSON *s, const char *name, const char *path,
                     int32_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != (double)(int64_t)v->valuedouble)
        return fail(c, path, "'%s' must be a non-negative integer", name);
    if (v->valuedouble > 4096) return fail(c, path, "'%s' above 4096 is not supported", name);
    *out = (int32_t)v->valuedouble;
    return 0;
}

static int32_t array_node(struct cctx *c, const cJSON *s, const char *path, int depth)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    char p[512];
    int32_t mn = 0, mx = -1;
    if (get_count(c, s, "minItems", path, &mn) || get_count(c, s, "maxItems", path, &mx))
        return -1;
    if (mx >= 0 && mn > mx)
        return fail(c, path, "unsatisfiable: 'minItems' %d > 'maxItems' %d", mn, mx);
    int32_t it;
    if (items) {
        if (!cJSON_IsObject(items) && !cJSON_IsBool(items))
            return fail(c, path, "'items' must be a schema (tuple 'items' is not supported)");
        sub_path(p, sizeof p, path, "items", NULL);
        it = compile(c, items, p, depth + 1);
    } else {
        it = any_value(c, path);
    }
    if (it < 0) return -1;
    int32_t id = new_node(c->g, K_ARRAY);
    if (id < 0) return oom(c, path);
    struct node *a = &c->g->nodes[id];
    a->a = it;
    a->b = mn;
    a->c = mx;
    a->d = mx > mn ? mx : mn;
    return id;
}

static int32_t simple_node(struct cctx *c, uint8_t kind, bool integer, const char *path)
{
    int32_t id = new_node(c->g, kind);
    if (id < 0) return oom(c, path);
    c->g->nodes[id].integer = integer;
    return id;
}

/* A string, with minLength / maxLength in characters (code points). */
static int32_t string_node(struct cctx *c, const cJSON *s, const char *path)
{
    int32_t mn = 0, mx = -1;
    if (get_count(c, s, "minLength", path, &mn) || get_count(c, s, "maxLength", path, &mx))
        return -1;
    if (mx >= 0 && mn > mx)
        return fail(c, path, "unsatisfiable: 'minLength' %d > 'maxLength' %d", mn, mx);
    int32_t id = simple_node(c, K_STRING, false, path);
    if (id < 0) return -1;
    c->g->nodes[id].b = mn;
    c->g->nodes[id].c = mx;
    return id;
}

/* Any JSON value, built once: ANYOF of a map object, an array, a string, a
 * number and the three words. */
static int32_t any_value(struct cctx *c, const char *path)
{
    if (c->any_value >= 0) return c->any_value;
    struct jsg *g = c->g;
    int32_t id = new_node(g, K_ANYOF);
    if (id < 0) return oom(c, path);
    c->any_value = id;
    int32_t alts[5];
    alts[0] = new_node(g, K_OBJECT);
    alts[1] = new_node(g, K_ARRAY);
    alts[2] = simple_node(c, K_STRING, false, path);
    alts[3] = simple_node(c, K_NUMBER, false, path);
    alts[4] = words_literal(c, "[true,false,null]", path);
    for (int i = 0; i < 5; i++)
        if (alts[i] < 0) return oom(c, path);
    g->nodes[alts[0]] = (struct node){.kind = K_OBJECT, .c = id};
    g->nodes[alts[1]] = (struct node){.kind = K_ARRAY, .a = id, .c = -1};
    if (grow((void **)&g->alts, &g->cap_alts, g->n_alts + 5, sizeof *g->alts)) return oom(c, path);
    g->nodes[id].a = g->n_alts;
    g->nodes[id].b = 5;
    memcpy(g->alts + g->n_alts, alts, sizeof alts);
    g->n_alts += 5;
    return id;
}

/* "#", "#/$defs/Name" and "#/definitions/Name". */
static int32_t ref_node(struct cctx *c, const char *ref, const char *path, int depth)
{
    for (int32_t i = 0; i < c->n_refs; i++)
        if (strcmp(c->refs[i].path, ref) == 0) return c->refs[i].node;
    const cJSON *target = NULL;
    if (strcmp(ref, "#") == 0) target = c->root;
    else if (strncmp(ref, "#/$defs/", 8) == 0)
        target = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(c->root, "$defs"), ref + 8);
    else if (strncmp(ref, "#/definitions/", 14) == 0)
        target = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(c->root, "definitions"), ref + 14);
    else return fail(c, path, "'$ref' '%.80s' is not supported (only #, #/$defs/.. and "
                              "#/definitions/..)", ref);
    if (!target) return fail(c, path, "'$ref' '%.80s' names no definition", ref);
    int32_t id = new_node(c->g, K_REF);
    if (id < 0 || grow((void **)&c->refs, &c->cap_refs, c->n_refs + 1, sizeof *c->refs))
        return oom(c, path);
    c->g->nodes[id].a = -1;
    c->refs[c->n_refs].path = strdup(ref);
    if (!c->refs[c->n_refs].path) return oom(c, path);
    c->refs[c->n_refs++].node = id;
    char p[512];
    snprintf(p, sizeof p, "%s", ref);
    int32_t t = compile(c, target, p, depth + 1);
    if (t < 0) return -1;
    c->g->nodes[id].a = t;
    return id;
}

static int32_t type_node(struct cctx *c, const cJSON *s, const char *type, const char *path,
                         int depth)
{
    if (strcmp(type, "object") == 0) return object_node(c, s, path, depth);
    if (strcmp(type, "array") == 0) return array_node(c, s, path, depth);
    if (strcmp(type, "string") == 0) return string_node(c, s, path);
    if (strcmp(type, "integer") == 0) return simple_node(c, K_NUMBER, true, path);
    if (strcmp(type, "number") == 0) return simple_node(c, K_NUMBER, false, path);
    if (strcmp(type, "boolean") == 0) return words_literal(c, "[true,false]", path);
    if (strcmp(type, "null") == 0) return words_literal(c, "[null]", path);
    return fail(c, path, "'type' '%.32s' is not a JSON Schema type", type);
}

static bool has_constraint_besides(const cJSON *s, const char *keep)
{
    const cJSON *k;
    cJSON_ArrayForEach(k, s)
        if (strcmp(k->string, keep) != 0 && !in_list(annotations, k->string)) return true;
    return false;
}

static const char *first_constraint_besides(const cJSON *s, const char *keep)
{
    const cJSON *k;
    cJSON_ArrayForEach(k, s)
        if (strcmp(k->string, keep) != 0 && !in_list(annotations, k->string)) return k->string;
    return "";
}

static int32_t compile_anyof(struct cctx *c, const cJSON *s, const cJSON *any, const char *path,
                             int depth)
{
    if (has_constraint_besides(s, "anyOf"))
        return fail(c, path, "combining 'anyOf' with '%s' is not supported",
                    first_constraint_besides(s, "anyOf"));
    int n = cJSON_IsArray(any) ? cJSON_GetArraySize(any) : 0;
    if (n == 0) return fail(c, path, "'anyOf' must be a non-empty array of schemas");
    if (n > 64) return fail(c, path, "'anyOf' with more than 64 alternatives");
    int32_t alts[64];
    int i = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, any) {
        char p[512], idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        sub_path(p, sizeof p, path, "anyOf", idx);
        if ((alts[i++] = compile(c, a, p, depth + 1)) < 0) return -1;
    }
    return anyof_node(c, alts, n, path);
}

static int32_t compile_types(struct cctx *c, const cJSON *s, const cJSON *type, const char *path,
                             int depth)
{
    if (cJSON_IsString(type)) return type_node(c, s, type->valuestring, path, depth);
    int n = cJSON_IsArray(type) ? cJSON_GetArraySize(type) : 0;
    if (n == 0 || n > 8) return fail(c, path, "'type' must be a type name or an array of them");
    int32_t alts[8];
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, type) {
        if (!cJSON_IsString(t)) return fail(c, path, "'type' must hold strings");
        if ((alts[i++] = type_node(c, s, t->valuestring, path, depth)) < 0) return -1;
    }
    return n == 1 ? alts[0] : anyof_node(c, alts, n, path);
}

static int32_t compile(struct cctx *c, const cJSON *s, const char *path, int depth)
{
    if (depth > 64) return fail(c, path, "schema nested more than 64 levels");
    if (cJSON_IsTrue(s)) return any_value(c, path);
    if (cJSON_IsFalse(s)) return fail(c, path, "unsatisfiable: the schema is false");
    if (!cJSON_IsObject(s)) return fail(c, path, "a schema must be an object");
    const cJSON *k;
    cJSON_ArrayForEach(k, s)
        if (!in_list(annotations, k->string) && !in_list(enforced, k->string))
            return fail(c, path, "'%.64s' is not supported", k->string);
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (ref) {
        if (!cJSON_IsString(ref)) return fail(c, path, "'$ref' must be a string");
        if (has_constraint_besides(s, "$ref"))
            return fail(c, path, "combining '$ref' with '%s' is not supported",
                        first_constraint_besides(s, "$ref"));
        return ref_node(c, ref->valuestring, path, depth);
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (en) {
        if (!cJSON_IsArray(en) || cJSON_GetArraySize(en) == 0)
            return fail(c, path, "'enum' must be a non-empty array");
        return literal_node(c, en->child, cJSON_GetArraySize(en), path);
    }
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (cn) return literal_node(c, cn, 1, path);
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (any) return compile_anyof(c, s, any, path, depth);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (type) return compile_types(c, s, type, path, depth);
    if (cJSON_GetObjectItemCaseSensitive(s, "properties") ||
        cJSON_GetObjectItemCaseSensitive(s, "required") ||
        cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"))
        return object_node(c, s, path, depth);
    if (cJSON_GetObjectItemCaseSensitive(s, "items")) return array_node(c, s, path, depth);
    return any_value(c, path);
}

/* A $ref chain that never reaches a value would loop forever. */
static int check_refs(struct cctx *c)
{
    struct jsg *g = c->g;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        int32_t n = i, steps = 0;
        while (g->nodes[n].kind == K_REF && steps++ <= g->n_nodes) n = g->nodes[n].a;
        if (g->nodes[n].kind == K_REF) return fail(c, "#", "unsatisfiable: a '$ref' cycle");
    }
    return 0;
}

/* A map object whose values are any JSON value ({"type":"json_object"}). */
static int32_t any_object(struct cctx *c)
{
    int32_t v = any_value(c, "#");
    int32_t id = v < 0 ? -1 : new_node(c->g, K_OBJECT);
    if (id < 0) return oom(c, "#");
    c->g->nodes[id] = (struct node){.kind = K_OBJECT, .c = v};
    return id;
}

struct jsg *jsg_compile(const char *schema, size_t len, bool any_obj, char *err, size_t errlen)
{
    struct jsg *g = calloc(1, sizeof *g);
    struct cctx c = {.g = g, .err = err, .errlen = errlen, .any_value = -1};
    cJSON *root = NULL;
    if (!g) {
        snprintf(err, errlen, "out of memory compiling the schema");
        return NULL;
    }
    g->any_key = new_node(g, K_STRING);
    if (any_obj) {
        g->root = any_object(&c);
    } else {
        const char *end = NULL;
        root = schema ? cJSON_ParseWithLengthOpts(schema, len, &end, false) : NULL;
        if (!root) {
            snprintf(err, errlen, "the schema is not valid JSON (near byte %ld)",
                     end && schema ? (long)(end - schema) : 0L);
            goto fail;
        }
        c.root = root;
        if (!cJSON_IsObject(root) && !cJSON_IsBool(root)) {
            fail(&c, "#", "a schema must be an object");
            goto fail;
        }
        g->root = compile(&c, root, "#", 0);
    }
    if (g->root < 0 || check_refs(&c) != 0) goto fail;
    cJSON_Delete(root);
    for (int32_t i = 0; i < c.n_refs; i++) free(c.refs[i].path);
    free(c.refs);
    return g;
fail:
    cJSON_Delete(root);
    for (int32_t i = 0; i < c.n_refs; i++) free(c.refs[i].path);
    free(c.refs);
    jsg_free(g);
    return NULL;
}

void jsg_free(struct jsg *g)
{
    if (!g) return;
    free(g->nodes);
    free(g->props);
    free(g->lits);
    free(g->alts);
    free(g->text);
    free(g);
}

int32_t jsg_n_nodes(const struct jsg *g)
{
    return g->n_nodes;
}

/* ---- matcher ------------------------------------------------------------------- */

enum { O_START, O_OPEN, O_KEY, O_COLON, O_VALWAIT, O_VAL, O_AFTER, O_NEXT };
enum { A_START, A_OPEN, A_VAL, A_AFTER, A_NEXT };
enum { S_START, S_IN, S_ESC, S_HEX, S_U8 };
enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

/* What a frame did with a byte. */
enum act { R_FAIL, R_OK, R_DONE, R_POP, R_PUSH };

static bool is_ws(uint8_t b)
{
    return b == ' ' || b == '\n' || b == '\t';
}

static bool is_digit(uint8_t b)
{
    return b >= '0' && b <= '9';
}

/* Whitespace in a frame that allows it: counted, bounded. */
static enum act take_ws(struct jsg_frame *f)
{
    if (f->ws >= JSG_WS_MAX) return R_FAIL;
    f->ws++;
    return R_OK;
}

static void set_phase(struct jsg_frame *f, uint8_t phase)
{
    f->phase = phase;
    f->ws = 0;
}

static enum act object_byte(const struct jsg *g, const struct node *n, struct jsg_frame *f,
                            uint8_t b, int32_t *child)
{
    const bool map = n->b == 0 && n->c >= 0;
    switch (f->phase) {
    case O_START:
        if (b != '{') return R_FAIL;
        set_phase(f, O_OPEN);
        return R_OK;
    case O_OPEN:
    case O_NEXT:
        if (is_ws(b)) return take_ws(f);
        if (b == '}' && f->phase == O_OPEN && (map || n->b == 0 || g->props[n->a].req_from == n->b))
            return R_DONE;
        if (b != '"' || (!map && f->a >= n->b)) return R_FAIL;
        *child = map ? -2 : n->d + f->a; /* -2: any string (a map's key) */
        set_phase(f, O_KEY);
        return R_PUSH;
    case O_COLON:
        if (is_ws(b)) return take_ws(f);
        if (b != ':') return R_FAIL;
        set_phase(f, O_VALWAIT);
        return R_OK;
    case O_VALWAIT:
        if (is_ws(b)) return take_ws(f);
        *child = map ? n->c : g->props[n->a + f->b].value;
        set_phase(f, O_VAL);
        return R_PUSH;
    case O_AFTER:
        if (is_ws(b)) return take_ws(f);
        if (b == ',' && (map || f->a < n->b)) {
            set_phase(f, O_NEXT);
            return R_OK;
        }
        if (b == '}' && (map || f->a >= n->b || g->props[n->a + f->a].req_from == n->b))
            return R_DONE;
        return R_FAIL;
    default:
        return R_FAIL;
    }
}

static enum act array_byte(const struct node *n, struct jsg_frame *f, uint8_t b, int32_t *child)
{
    switch (f->phase) {
    case A_START:
        if (b != '[') return R_FAIL;
        set_phase(f, A_OPEN);
        return R_OK;
    case A_OPEN:
    case A_NEXT:
        if (is_ws(b)) return take_ws(f);
        if (b == ']' && f->phase == A_OPEN && n->b == 0) return R_DONE;
        if (f->phase == A_OPEN && n->c == 0) return R_FAIL;
        *child = n->a;
        set_phase(f, A_VAL);
        return R_PUSH;
    case A_AFTER:
        if (is_ws(b)) return take_ws(f);
        if (b == ',' && (n->c < 0 || f->a < n->c)) {
            set_phase(f, A_NEXT);
            return R_OK;
        }
        if (b == ']' && f->a >= n->b) return R_DONE;
        return R_FAIL;
    default:
        return R_FAIL;
    }
}

static bool is_hex(uint8_t b)
{
    return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F');
}

/* A new character in a string with a length bound: counted (a) as far as
 * the bound needs; strings without bounds keep a at 0 so that their states
 * recur. */
static bool count_char(const struct node *n, struct jsg_frame *f)
{
    if (n->c < 0 && n->b == 0) return true;
    if (n->c >= 0 && f->a >= n->c) return false;
    if (f->a < UINT16_MAX) f->a++;
    return true;
}

static enum act string_byte(const struct node *n, struct jsg_frame *f, uint8_t b)
{
    switch (f->phase) {
    case S_START:
        if (b != '"') return R_FAIL;
        f->phase = S_IN;
        return R_OK;
    case S_IN:
        if (b == '"') return f->a >= n->b ? R_DONE : R_FAIL;
        if (b >= 0x20 && b != 0x7f && (b < 0x80 || b >= 0xC2) && !count_char(n, f)) return R_FAIL;
        if (b == '\\') f->phase = S_ESC;
        else if (b < 0x20 || b == 0x7f) return R_FAIL;
        else if (b >= 0x80) {
            /* a UTF-8 lead byte and how many continuation bytes follow */
            if (b >= 0xC2 && b <= 0xDF) f->c = 1;
            else if (b >= 0xE0 && b <= 0xEF) f->c = 2;
            else if (b >= 0xF0 && b <= 0xF4) f->c = 3;
            else return R_FAIL;
            f->phase = S_U8;
        }
        return R_OK;
    case S_ESC:
        if (b == 'u') {
            f->phase = S_HEX;
            f->c = 0;
            return R_OK;
        }
        if (!strchr("\"\\/bfnrt", b) || !b) return R_FAIL;
        f->phase = S_IN;
        return R_OK;
    case S_HEX:
        if (!is_hex(b)) return R_FAIL;
        /* no surrogates (\uD800-\uDFFF): a lone one is not valid text, and
         * characters beyond the BMP can be written as UTF-8 */
        if (f->c == 0) f->b = b == 'd' || b == 'D';
        else if (f->c == 1 && f->b && !(b >= '0' && b <= '7')) return R_FAIL;
        if (++f->c == 4) {
            f->phase = S_IN;
            f->c = 0;
            f->b = 0;
        }
        return R_OK;
    case S_U8:
        if ((b & 0xC0) != 0x80) return R_FAIL;
        if (--f->c == 0) f->phase = S_IN;
        return R_OK;
    default:
        return R_FAIL;
    }
}

static bool number_can_end(const struct jsg_frame *f)
{
    return f->phase == N_ZERO || f->phase == N_INT || f->phase == N_FRAC || f->phase == N_EXP;
}

static enum act digit(struct jsg_frame *f, uint8_t phase, int max)
{
    if (f->phase != phase) f->c = 0;
    if (f->c >= max) return R_FAIL;
    f->phase = phase;
    f->c++;
    return R_OK;
}

static enum act number_byte(const struct node *n, struct jsg_frame *f, uint8_t b)
{
    const bool d = is_digit(b);
    switch (f->phase) {
    case N_START:
        if (b == '-') {
            f->phase = N_MINUS;
            return R_OK;
        }
        /* fall through */
    case N_MINUS:
        if (b == '0') {
            f->phase = N_ZERO;
            return R_OK;
        }
        return d ? digit(f, N_INT, JSG_MAX_DIGITS) : R_FAIL;
    case N_ZERO:
    case N_INT:
        if (d && f->phase == N_INT) return digit(f, N_INT, JSG_MAX_DIGITS);
        if (b == '.' && !n->integer) {
            f->phase = N_DOT;
            return R_OK;
        }
        if ((b == 'e' || b == 'E') && !n->integer) {
            f->phase = N_E;
            return R_OK;
        }
        return R_POP;
    case N_DOT:
        return d ? digit(f, N_FRAC, JSG_MAX_DIGITS) : R_FAIL;
    case N_FRAC:
        if (d) return digit(f, N_FRAC, JSG_MAX_DIGITS);
        if (b == 'e' || b == 'E') {
            f->phase = N_E;
            return R_OK;
        }
        return R_POP;
    case N_E:
        if (b == '+' || b == '-') {
            f->phase = N_ESIGN;
            return R_OK;
        }
        /* fall through */
    case N_ESIGN:
        return d ? digit(f, N_EXP, 3) : R_FAIL;
    case N_EXP:
        return d ? digit(f, N_EXP, 3) : R_POP;
    default:
        return R_FAIL;
    }
}

static const struct lit *lit_at(const struct jsg *g, const struct node *n, int32_t i)
{
    return &g->lits[n->a + i];
}

static bool literal_can_end(const struct jsg *g, const struct node *n, const struct jsg_frame *f)
{
    return f->a < f->b && lit_at(g, n, f->a)->len == f->c;
}

/* The range [a, b) of texts that share the c bytes matched so far narrows
 * to those whose next byte is b (contiguous: the set is sorted). */
static enum act literal_byte(const struct jsg *g, const struct node *n, struct jsg_frame *f,
                             uint8_t byte)
{
    int32_t lo = f->a, hi = f->b;
    while (lo < hi) {
        const struct lit *l = lit_at(g, n, lo);
        if (l->len > f->c && (uint8_t)g->text[l->off + f->c] == byte) break;
        lo++;
    }
    if (lo == hi) return literal_can_end(g, n, f) ? R_POP : R_FAIL;
    int32_t e = lo + 1;
    while (e < hi) {
        const struct lit *l = lit_at(g, n, e);
        if (l->len <= f->c || (uint8_t)g->text[l->off + f->c] != byte) break;
        e++;
    }
    f->a = (uint16_t)lo;
    f->b = (uint16_t)e;
    f->c++;
    if (e - lo == 1 && lit_at(g, n, lo)->len == f->c) return R_DONE;
    return R_OK;
}

static enum act frame_byte(const struct jsg *g, struct jsg_frame *f, uint8_t b, int32_t *child)
{
    const struct node *n = &g->nodes[f->node];
    switch (n->kind) {
    case K_OBJECT: return object_byte(g, n, f, b, child);
    case K_ARRAY: return array_byte(n, f, b, child);
    case K_STRING: return string_byte(n, f, b);
    case K_NUMBER: return number_byte(n, f, b);
    case K_LITERAL: return literal_byte(g, n, f, b);
    default: return R_FAIL;
    }
}

/* The parent of a value that just ended moves on. */
static void child_done(const struct jsg *g, struct jsg_frame *p, const struct jsg_frame *ch)
{
    const struct node *n = &g->nodes[p->node];
    if (n->kind == K_OBJECT) {
        if (p->phase == O_KEY) {
            const struct node *kn = &g->nodes[ch->node];
            /* a keyset literal tells which property it was; a map key does not matter */
            if (kn->kind == K_LITERAL) p->b = (uint16_t)lit_at(g, kn, ch->a)->tag;
            set_phase(p, O_COLON);
        } else {
            p->a = (uint16_t)(p->b + 1);
            set_phase(p, O_AFTER);
            if (n->b == 0) p->a = 0;
        }
    } else if (n->kind == K_ARRAY) {
        if (p->a < n->d) p->a++; /* counted only as far as a bound needs */
        set_phase(p, A_AFTER);
    }
}

static void emit(struct jsg_state *out, const struct jsg_frame *f, int depth)
{
    for (int i = 0; i < out->n; i++)
        if (out->depth[i] == depth && memcmp(out->f[i], f, (size_t)depth * sizeof *f) == 0)
            return;
    if (out->n >= JSG_ALTS) return; /* fewer alternatives: still only valid texts */
    out->depth[out->n] = (uint8_t)depth;
    memcpy(out->f[out->n], f, (size_t)depth * sizeof *f);
    out->n++;
}

static void feed(const struct jsg *g, struct jsg_frame *f, int d, uint8_t b, struct jsg_state *out,
                 int forks);

/* Pushes node (forking over anyOf alternatives) and feeds it b. node -2:
 * a string (map keys). */
static void push_feed(const struct jsg *g, struct jsg_frame *f, int d, int32_t node, uint8_t b,
                      struct jsg_state *out, int forks)
{
    if (node == -2) node = g->any_key;
    for (int hops = 0; g->nodes[node].kind == K_REF && hops < 64; hops++) node = g->nodes[node].a;
    const struct node *n = &g->nodes[node];
    if (n->kind == K_REF) return;
    if (n->kind == K_ANYOF) {
        if (forks >= 8) return; /* anyOf nested in itself without structure: no more forks */
        for (int32_t i = 0; i < n->b; i++) {
            struct jsg_frame copy[JSG_DEPTH];
            memcpy(copy, f, (size_t)d * sizeof *f);
            push_feed(g, copy, d, g->alts[n->a + i], b, out, forks + 1);
        }
        return;
    }
    if (d >= JSG_DEPTH) return;
    f[d] = (struct jsg_frame){.node = (uint16_t)node};
    if (n->kind == K_LITERAL) f[d].b = (uint16_t)n->b;
    feed(g, f, d + 1, b, out, forks);
}

/* Feeds b to the stack f[0..d); survivors go to out. */
static void feed(const struct jsg *g, struct jsg_frame *f, int d, uint8_t b, struct jsg_state *out,
                 int forks)
{
    while (d > 0) {
        int32_t child = -1;
        struct jsg_frame *t = &f[d - 1];
        switch (frame_byte(g, t, b, &child)) {
        case R_FAIL:
            return;
        case R_OK:
            emit(out, f, d);
            return;
        case R_DONE:
            d--;
            if (d > 0) child_done(g, &f[d - 1], t);
            emit(out, f, d);
            return;
        case R_POP:
            d--;
            if (d > 0) child_done(g, &f[d - 1], t);
            continue; /* the byte goes to the parent */
        case R_PUSH:
            push_feed(g, f, d, child, b, out, forks);
            return;
        }
    }
}

void jsg_start(const struct jsg *g, struct jsg_state *s)
{
    memset(s, 0, sizeof *s);
    /* Phase 0xff: the root, not yet pushed (it may fork on its first byte). */
    s->n = 1;
    s->depth[0] = 1;
    s->f[0][0] = (struct jsg_frame){.node = (uint16_t)g->root, .phase = 0xff};
}

bool jsg_step(const struct jsg *g, const struct jsg_state *in, uint8_t b, struct jsg_state *out)
{
    out->n = 0;
    for (int i = 0; i < in->n; i++) {
        struct jsg_frame f[JSG_DEPTH];
        int d = in->depth[i];
        if (d == 1 && in->f[i][0].phase == 0xff) { /* before the first byte */
            push_feed(g, f, 0, in->f[i][0].node, b, out, 0);
            continue;
        }
        memcpy(f, in->f[i], (size_t)d * sizeof *f);
        feed(g, f, d, b, out, 0);
    }
    return out->n > 0;
}

void jsg_state_copy(struct jsg_state *dst, const struct jsg_state *src)
{
    dst->n = src->n;
    for (int i = 0; i < src->n; i++) {
        dst->depth[i] = src->depth[i];
        memcpy(dst->f[i], src->f[i], (size_t)src->depth[i] * sizeof src->f[i][0]);
    }
}

bool jsg_feed(const struct jsg *g, struct jsg_state *s, const char *bytes, size_t n)
{
    struct jsg_state tmp;
    for (size_t i = 0; i < n; i++) {
        if (!jsg_step(g, s, (uint8_t)bytes[i], &tmp)) return false;
        jsg_state_copy(s, &tmp);
    }
    return true;
}

static bool frame_can_end(const struct jsg *g, const struct jsg_frame *f)
{
    const struct node *n = &g->nodes[f->node];
    if (f->phase == 0xff) return false;
    if (n->kind == K_NUMBER) return number_can_end(f);
    if (n->kind == K_LITERAL) return literal_can_end(g, n, f);
    return false;
}

bool jsg_complete(const struct jsg *g, const struct jsg_state *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->depth[i] == 0 || (s->depth[i] == 1 && frame_can_end(g, &s->f[i][0]))) return true;
    return false;
}

int32_t jsg_plain_string_room(const struct jsg *g, const struct jsg_state *s)
{
    int32_t room = -1;
    for (int i = 0; i < s->n; i++) {
        int d = s->depth[i];
        if (d == 0) return -1;
        const struct jsg_frame *t = &s->f[i][d - 1];
        const struct node *n = &g->nodes[t->node];
        if (t->phase != S_IN || n->kind != K_STRING) return -1;
        int32_t r = n->c < 0 ? INT32_MAX : n->c - t->a;
        if (r > room) room = r;
    }
    return room;
}

size_t jsg_state_key(const struct jsg_state *s, uint8_t *out, size_t cap)
{
    size_t n = 0;
    if (n < cap) out[n++] = s->n;
    for (int i = 0; i < s->n; i++) {
        if (n < cap) out[n++] = s->depth[i];
        size_t fb = (size_t)s->depth[i] * sizeof s->f[i][0];
        if (n + fb > cap) return n;
        memcpy(out + n, s->f[i], fb);
        n += fb;
    }
    return n;
}
