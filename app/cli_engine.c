/* cli_engine: opening the engine the shared options name (see cli.h):
 * --url makes a remote engine, --route a fallback route (engine/route).
 * Apart from cli.c so that cli.c links without the engine (app-config). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route.h"

/* A route without "local" runs no model here: like --url, only an explicit
 * -m lends its tokenizer. */
static bool route_is_remote(const struct cli *cli)
{
    struct route_spec spec;
    char err[256];
    if (!cli->route || route_parse(cli->route, &spec, err, sizeof err) != 0) return false;
    for (int32_t i = 0; i < spec.n; i++)
        if (spec.t[i].local) return false;
    return true;
}

struct engine *cli_engine_open(const struct cli *cli, const struct engine_config *c, char *err,
                               size_t errlen)
{
    if (!cli->route) return engine_open(c, err, errlen);
    struct route_spec spec;
    if (route_parse(cli->route, &spec, err, errlen) != 0) return NULL;
    struct engine_config base = *c;
    base.remote.insecure = cli->insecure;
    base.remote.read_timeout_s = cli->read_timeout_s;
    base.remote.n_urls = 0;
    struct route_config rc = {
        .spec = &spec,
        .base = &base,
        .api_key = cli->api_key ? cli->api_key : getenv("TERN_API_KEY"),
        .ttft_deadline_s = cli->route_ttft_s,
        .tokenizer_path = cli->model, /* as with --url: only an explicit -m */
    };
    return route_open(&rc, err, errlen);
}

bool cli_engine_remote(const struct cli *cli, struct engine_config *c)
{
    if (cli->route) {
        if (!route_is_remote(cli)) return false;
        c->model_path = cli->model;
        return true;
    }
    if (cli->n_urls == 0) return false;
    c->remote.urls = cli->urls;
    c->remote.n_urls = cli->n_urls;
    c->remote.api_key = cli->api_key ? cli->api_key : getenv("TERN_API_KEY");
    c->remote.insecure = cli->insecure;
    c->remote.balance = cli->balance;
    c->remote.read_timeout_s = cli->read_timeout_s;
    c->model_path = cli->model; /* only an explicit -m lends its tokenizer */
    if (cli->insecure)
        fprintf(stderr, "tern %s: WARNING: --insecure: TLS certificates are NOT verified; "
                        "anyone on the path can read and change this traffic\n", cli->cmd);
    return true;
}

