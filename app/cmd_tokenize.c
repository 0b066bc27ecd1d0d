/* cmd_tokenize: 'tern tokenize' prints the token ids of a text (argument,
 * --file or standard input), for tests and for people debugging prompts.
 * By default no BOS/EOS is added and special-token text is plain text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "gguf.h"
#include "textsafe.h"
#include "tok.h"

enum { OPT_IDS = CLI_OPT_CMD, OPT_PIECES, OPT_SPECIAL, OPT_BOS, OPT_FILE, OPT_VOCAB };

struct tokenize_opts {
    bool ids, pieces, vocab, special, bos;
    const char *file;
};

static int on_opt(int c, const char *arg, void *ud)
{
    struct tokenize_opts *o = ud;
    switch (c) {
    case OPT_IDS: o->ids = true; break;
    case OPT_PIECES: o->pieces = true; break;
    case OPT_VOCAB: o->vocab = true; break;
    case OPT_SPECIAL: o->special = true; break;
    case OPT_BOS: o->bos = true; break;
    case OPT_FILE: o->file = arg; break;
    default: return -1;
    }
    return 0;
}

/* Reads all of f; returns a malloc'd buffer (NUL-terminated) or NULL. */
static char *read_all(FILE *f, size_t *n)
{
    size_t cap = 1 << 16, len = 0, r;
    char *b = malloc(cap + 1);
    while (b && (r = fread(b + len, 1, cap - len, f)) > 0) {
        len += r;
        if (len == cap) {
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb) {
                free(b);
                return NULL;
            }
            b = nb;
            cap *= 2;
        }
    }
    if (b) b[len] = 0;
    *n = len;
    return b;
}

/* Prints bytes readably: whole UTF-8 characters as they are (a CJK token
 * shows its character), \n \t \r \\ \' and \xNN for control bytes and for
 * the bytes of a partial or invalid UTF-8 sequence (a byte-level token may
 * hold a third of a character: shown as bytes, never as U+FFFD), \uNNNN
 * for C1 controls. */
static void print_escaped(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t k = textsafe_seq(u + i, n - i);
        if (k == 0) printf("\\x%02x", c);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\\') fputs("\\\\", stdout);
        else if (c == '\'') fputs("\\'", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else if (k == 2 && c == 0xC2 && u[i + 1] < 0xA0) printf("\\u%04x", u[i + 1]);
        else fwrite(u + i, 1, k, stdout);
        i += k ? k : 1;
    }
}

/* Whether s[0..n) is whole UTF-8 characters. */
static bool utf8_whole(const char *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = textsafe_seq((const unsigned char *)s + i, n - i))) return false;
    return true;
}

/* Bytes of consecutive tokens that are not whole characters on their own,
 * until together they are: the token that completes them gets the text
 * they make ("-> '你'"). */
struct partial {
    char b[32];
    size_t n;
};

static void partial_add(struct partial *p, const char *s, size_t n)
{
    if (p->n == 0 && utf8_whole(s, n)) return;
    if (p->n + n > sizeof p->b) { /* never completes: bytes that are not UTF-8 */
        p->n = 0;
        return;
    }
    memcpy(p->b + p->n, s, n);
    p->n += n;
    if (utf8_whole(p->b, p->n)) {
        fputs(" -> '", stdout);
        print_escaped(p->b, p->n);
        putchar('\'');
        p->n = 0;
    }
}

static void print_tokens(const struct tok *t, const int32_t *ids, int64_t n,
                         const struct tokenize_opts *o)
{
    if (o->ids) {
        for (int64_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
        return;
    }
    if (o->vocab) {
        for (int64_t i = 0; i < n; i++) {
            if (i) putchar(' ');
            const char *p = tok_piece(t, ids[i]);
            print_escaped(p, strlen(p));
        }
        putchar('\n');
        return;
    }
    size_t cap = tok_max_piece(t) + 1;
    char *buf = malloc(cap);
    struct partial part = {0};
    for (int64_t i = 0; buf && i < n; i++) {
        size_t k = tok_decode_token_special(t, ids[i], buf, cap);
        if (o->pieces) { /* each token's text, quoted (a text may hold spaces) */
            printf("%s'", i ? " " : "");
            print_escaped(buf, k);
            putchar('\'');
            continue;
        }
        printf("%6d '", ids[i]);
        print_escaped(buf, k);
        putchar('\'');
        if (tok_is_special(t, ids[i])) fputs(" (special)", stdout);
        else partial_add(&part, buf, k);
        putchar('\n');
    }
    if (o->pieces) putchar('\n');
    free(buf);
}

int cmd_tokenize(int argc, char **argv)
{
    static const char use[] =
        "usage: tern tokenize [-m MODEL] [--ids|--pieces|--vocab] [--special] [--bos]\n"
        "                     [TEXT | --file F]\n"
        "\n"
        "Prints the token ids of TEXT (or of file F, or of standard input when neither is\n"
        "given), one token per line with its text: whole UTF-8 characters as they are,\n"
        "control bytes escaped (\\n, \\x1b), and the bytes of a partial UTF-8 sequence (a\n"
        "byte-level token may hold part of a character) as \\xNN; the token that\n"
        "completes such a character shows it after '->'.\n"
        "\n"
        "  --ids        only the ids, separated by single spaces, on one line\n"
        "  --pieces     only the tokens' texts, quoted, separated by spaces, on one line\n"
        "  --vocab      only the vocabulary entries as stored (byte-level BPE: Ġ for a\n"
        "               space, Ċ for a newline), separated by spaces, on one line\n"
        "  --special    parse special-token text (<|im_end|>, ...) as special tokens\n"
        "  --bos        add BOS (and EOS) as the model's metadata says\n"
        "  --file F     read the text from F ('-' = standard input)\n";
    static const struct option longopts[] = {
        {"ids", no_argument, 0, OPT_IDS},       {"pieces", no_argument, 0, OPT_PIECES},
        {"special", no_argument, 0, OPT_SPECIAL}, {"bos", no_argument, 0, OPT_BOS},
        {"file", required_argument, 0, OPT_FILE}, {"vocab", no_argument, 0, OPT_VOCAB},
        {0, 0, 0, 0},
    };
    struct tokenize_opts o = {0};
    struct cli cli;
    struct gguf_ctx *g = NULL;
    struct tok *t = NULL;
    char *text = NULL;
    int32_t *ids = NULL;
    int rc = cli_parse(&cli, argc, argv, "", longopts, on_opt, &o, use);
    if (rc >= 0) goto done;
    rc = CLI_EXIT_USAGE;
    if (o.ids + o.pieces + o.vocab > 1) {
        fprintf(stderr, "tern tokenize: --ids, --pieces and --vocab exclude each other\n");
        goto done;
    }
    if (cli.argc > 1 || (cli.argc == 1 && o.file)) {
        fprintf(stderr, "tern tokenize: give one TEXT argument or --file, not both or more\n");
        goto done;
    }
    rc = CLI_EXIT_FAIL;
    char model[4096], err[1024];
    if (cli_model_path(&cli, model, sizeof model, err, sizeof err) != 0) {
        fprintf(stderr, "tern tokenize: %s\n", err);
        goto done;
    }
    size_t len = 0;
    if (cli.argc == 1) {
        len = strlen(cli.argv[0]);
        text = strdup(cli.argv[0]);
    } else if (o.file && strcmp(o.file, "-") != 0) {
        FILE *f = fopen(o.file, "rb");
        if (!f) {
            fprintf(stderr, "tern tokenize: cannot open '%s'\n", o.file);
            goto done;
        }
        text = read_all(f, &len);
        fclose(f);
    } else {
        text = read_all(stdin, &len);
    }
    if (!text) {
        fprintf(stderr, "tern tokenize: cannot read the text\n");
        goto done;
    }
    if (!(g = gguf_open(model, err, sizeof err)) || !(t = tok_open(g, err, sizeof err))) {
        fprintf(stderr, "tern tokenize: %s\n", err);
        goto done;
    }
    unsigned flags = (o.bos ? TOK_ADD_BOS : 0) | (o.special ? TOK_PARSE_SPECIAL : 0);
    int64_t n = tok_encode(t, text, len, flags, NULL, 0, err, sizeof err);
    ids = n >= 0 ? malloc(((size_t)n + 1) * sizeof *ids) : NULL;
    if (n < 0 || !ids || tok_encode(t, text, len, flags, ids, n, err, sizeof err) != n) {
        fprintf(stderr, "tern tokenize: %s\n", n < 0 ? err : "out of memory");
        goto done;
    }
    print_tokens(t, ids, n, &o);
    rc = fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
done:
    free(ids);
    free(text);
    tok_close(t);
    if (g) gguf_close(g);
    cli_free(&cli);
    return rc;
}
