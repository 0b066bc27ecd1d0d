/* cmd_pull: 'tern pull URL|hf:ORG/REPO/FILE.gguf' downloads a model into the
 * models directory: streamed to FILE.part with a progress bar, resumed from
 * a partial file with an HTTP Range request, checked against a SHA-256 when
 * one is known (--sha256, or the X-Linked-Etag that Hugging Face sends for
 * its LFS files), checked to be a GGUF file, then renamed into place. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "commands.h"
#include "model_name.h"
#include "sha256.h"

enum { OPT_SHA = CLI_OPT_CMD, OPT_DIR, OPT_DRY, OPT_QUIET };

struct pull_opts {
    struct cli *cli;
    const char *sha256, *dir;
    bool dry, quiet;
};

struct dl {
    FILE *f;
    bool tty, quiet;
    curl_off_t have;       /* bytes already in the .part file */
    double t0, last;
    char etag_sha[65];     /* from X-Linked-Etag, when it is a SHA-256 */
    long status;
};

static int on_opt(int c, const char *arg, void *ud)
{
    struct pull_opts *o = ud;
    switch (c) {
    case OPT_SHA:
        if (strlen(arg) != 64 || strspn(arg, "0123456789abcdefABCDEF") != 64) {
            fprintf(stderr, "tern pull: --sha256: '%s' is not 64 hex digits\n", arg);
            return -1;
        }
        o->sha256 = arg;
        return 0;
    case OPT_DIR: o->dir = arg; return 0;
    case OPT_DRY: o->dry = true; return 0;
    case 'q':
    case OPT_QUIET: o->quiet = true; return 0;
    }
    return -1;
}

/* hf:ORG/REPO/FILE.gguf (or hf:ORG/REPO/PATH/FILE.gguf) -> its resolve URL. */
static int map_url(const char *src, char *url, size_t n, char *file, size_t fn)
{
    const char *path = src;
    if (!strncmp(src, "hf:", 3)) {
        const char *p = src + 3, *s1 = strchr(p, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
        if (!s1 || !s2 || !s2[1]) return -1;
        snprintf(url, n, "https://huggingface.co/%.*s/resolve/main/%s", (int)(s2 - p), p, s2 + 1);
        path = s2 + 1;
    } else if (strstr(src, "://")) {
        size_t l = strlen(src);
        if (l >= n) return -1;
        memcpy(url, src, l + 1);
        path = strstr(src, "://") + 3;
    } else {
        return -1;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t bl = strcspn(base, "?#");
    if (bl == 0 || bl >= fn) return -1;
    snprintf(file, fn, "%.*s", (int)bl, base);
    return 0;
}

static size_t on_header(char *b, size_t size, size_t nitems, void *ud)
{
    struct dl *d = ud;
    size_t n = size * nitems;
    static const char key[] = "x-linked-etag:";
    if (n > sizeof key && !strncasecmp(b, key, sizeof key - 1)) {
        const char *v = b + sizeof key - 1;
        while (*v == ' ' || *v == '"') v++;
        if (strspn(v, "0123456789abcdef") == 64) snprintf(d->etag_sha, sizeof d->etag_sha, "%.64s", v);
    }
    return n;
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *ud)
{
    struct dl *d = ud;
    return fwrite(p, size, nmemb, d->f);
}

static void human(double b, char *out, size_t n)
{
    if (b >= 1073741824.0) snprintf(out, n, "%.2f GiB", b / 1073741824.0);
    else snprintf(out, n, "%.1f MiB", b / 1048576.0);
}

static int on_progress(void *ud, curl_off_t total, curl_off_t now, curl_off_t ut, curl_off_t un)
{
    struct dl *d = ud;
    (void)ut, (void)un;
    double t = app_now_s();
    if (d->quiet || !d->tty || t - d->last < 0.1) return 0;
    d->last = t;
    double all = (double)(total + d->have), got = (double)(now + d->have);
    double rate = t > d->t0 ? (double)now / (t - d->t0) : 0;
    char a[32], b[32], r[32];
    human(got, a, sizeof a);
    human(all, b, sizeof b);
    human(rate, r, sizeof r);
    int w = 30, fill = all > 0 ? (int)(w * got / all) : 0;
    fprintf(stderr, "\r[");
    for (int i = 0; i < w; i++) fputs(i < fill ? "█" : "·", stderr);
    if (total > 0)
        fprintf(stderr, "] %s / %s  %s/s  ETA %.0f s\033[K", a, b, r,
                rate > 0 ? (all - got) / rate : 0.0);
    else
        fprintf(stderr, "] %s  %s/s\033[K", a, r);
    return 0;
}

static int file_sha256(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    struct sha256 s;
    sha256_init(&s);
    static unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&s, buf, n);
    fclose(f);
    sha256_final_hex(&s, hex);
    return 0;
}

/* One transfer into part (appending from have). 0, or -1 after a message. */
static int fetch(const char *url, const char *part, struct dl *d)
{
    CURL *c = curl_easy_init();
    char errbuf[CURL_ERROR_SIZE] = "";
    if (!c) {
        fprintf(stderr, "tern pull: cannot start libcurl\n");
        return -1;
    }
    d->f = fopen(part, d->have ? "ab" : "wb");
    if (!d->f) {
        fprintf(stderr, "tern pull: %s: %s\n", part, strerror(errno));
        curl_easy_cleanup(c);
        return -1;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tern-pull");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a stalled transfer ends */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, d);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, d);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, d);
    if (d->have) curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, d->have);
    d->t0 = d->last = app_now_s();
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &d->status);
    if (fclose(d->f) != 0 && rc == CURLE_OK) rc = CURLE_WRITE_ERROR;
    d->f = NULL;
    if (d->tty && !d->quiet) fputs("\r\033[K", stderr);
    curl_easy_cleanup(c);
    if (rc == CURLE_OK) return 0;
    /* An empty .part is no partial download: removed, not announced as kept. */
    struct stat sb;
    long long kept = stat(part, &sb) == 0 ? (long long)sb.st_size : 0;
    if (kept == 0) unlink(part);
    bool net = rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT ||
               rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_COULDNT_RESOLVE_PROXY;
    char hint[4400] = "";
    if (kept > 0)
        snprintf(hint, sizeof hint, " (%s%lld bytes kept in %s: run the same command again to "
                                    "resume)", net ? "no network, or the host is down? " : "",
                 kept, part);
    else if (net)
        snprintf(hint, sizeof hint, " (no network, or the host is down? nothing was downloaded)");
    fprintf(stderr, "tern pull: %s: %s%s\n", url, errbuf[0] ? errbuf : curl_easy_strerror(rc),
            hint);
    return -1;
}

static int pull(const struct pull_opts *o, const char *src)
{
    char url[4096], file[512], dir[2048], dest[4096], part[4200];
    if (map_url(src, url, sizeof url, file, sizeof file) != 0) {
        fprintf(stderr,
                "tern pull: '%s' is not a URL or hf:ORG/REPO/FILE.gguf\n", src);
        return CLI_EXIT_USAGE;
    }
    if (o->dir) snprintf(dir, sizeof dir, "%s", o->dir);
    else model_name_dir(dir, sizeof dir);
    snprintf(dest, sizeof dest, "%s/%s", dir, file);
    snprintf(part, sizeof part, "%s.part", dest);
    if (o->dry) {
        printf("%s -> %s\n", url, dest);
        return CLI_EXIT_OK;
    }
    if (access(dest, F_OK) == 0) {
        fprintf(stderr, "tern pull: %s is already there (remove it to fetch it again)\n", dest);
        return CLI_EXIT_OK;
    }
    char mk[2100];
    snprintf(mk, sizeof mk, "%s", dir);
    for (char *p = mk + 1; *p; p++)
        if (*p == '/') *p = 0, mkdir(mk, 0755), *p = '/';
    mkdir(mk, 0755);
    struct dl d = {.tty = isatty(STDERR_FILENO), .quiet = o->quiet};
    struct stat sb;
    if (stat(part, &sb) == 0 && sb.st_size > 0) {
        d.have = (curl_off_t)sb.st_size;
        if (!o->quiet) fprintf(stderr, "tern pull: resuming %s at %lld bytes\n", file, (long long)d.have);
    }
    if (!o->quiet) fprintf(stderr, "tern pull: %s -> %s\n", url, dest);
    int rc = fetch(url, part, &d);
    if (rc == 0 && d.have && d.status == 200) {
        /* the server ignored the range and sent it all: the file was appended
         * to; fetch it again from the start */
        d.have = 0;
        rc = fetch(url, part, &d);
    }
    if (rc != 0) return CLI_EXIT_FAIL;
    /* a model file starts with the GGUF magic */
    FILE *f = fopen(part, "rb");
    char magic[4] = {0};
    if (!f || fread(magic, 1, 4, f) != 4 || memcmp(magic, "GGUF", 4) != 0) {
        if (f) fclose(f);
        fprintf(stderr, "tern pull: %s is not a GGUF file (kept as %s)\n", url, part);
        return CLI_EXIT_FAIL;
    }
    fclose(f);
    const char *want = o->sha256 ? o->sha256 : d.etag_sha[0] ? d.etag_sha : NULL;
    if (want) {
        char got[65];
        if (file_sha256(part, got) != 0 || strcasecmp(got, want) != 0) {
            fprintf(stderr, "tern pull: SHA-256 mismatch for %s: got %s, expected %s (the file is "
                            "removed)\n", file, got, want);
            unlink(part);
            return CLI_EXIT_FAIL;
        }
        if (!o->quiet) fprintf(stderr, "tern pull: SHA-256 %s verified\n", got);
    }
    if (rename(part, dest) != 0) {
        fprintf(stderr, "tern pull: %s: %s\n", dest, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    printf("%s\n", dest);
    return CLI_EXIT_OK;
}

int cmd_pull(int argc, char **argv)
{
    static const char use[] =
        "usage: tern pull [OPTIONS] URL|hf:ORG/REPO/FILE.gguf\n"
        "\n"
        "Downloads a GGUF model into the models directory ($XDG_DATA_HOME/tern/models)\n"
        "with a progress bar; an interrupted download resumes from its .part file;\n"
        "the file is checked against its SHA-256 when one is known (--sha256, or the\n"
        "hash Hugging Face sends for LFS files). hf:ORG/REPO/FILE.gguf is fetched from\n"
        "https://huggingface.co/ORG/REPO/resolve/main/FILE.gguf.\n"
        "\n"
        "      --sha256 HEX   expected SHA-256 of the file\n"
        "      --dir DIR      download into DIR instead\n"
        "      --dry-run      print the URL and the destination, fetch nothing\n"
        "  -q, --quiet        no progress\n";
    static const struct option longopts[] = {
        {"sha256", required_argument, 0, OPT_SHA}, {"dir", required_argument, 0, OPT_DIR},
        {"dry-run", no_argument, 0, OPT_DRY},     {"quiet", no_argument, 0, OPT_QUIET},
        {0, 0, 0, 0}};
    struct cli cli;
    struct pull_opts o = {.cli = &cli};
    int rc = cli_parse(&cli, argc, argv, "q", longopts, on_opt, &o, use);
    if (rc >= 0) goto done;
    if (cli.argc != 1) {
        fprintf(stderr, "tern pull: give one URL or hf:ORG/REPO/FILE.gguf (see 'tern pull --help')\n");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = pull(&o, cli.argv[0]);
    curl_global_cleanup();
done:
    cli_free(&cli);
    return rc;
}
