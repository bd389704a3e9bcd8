/* circuit_file.c -- circuit files (circuit_file.h): a circuit of the
 * head graph (discover.h) to JSON text and back.
 *
 * The parser maps names to edge indices with the graph's own functions
 * (al_graph_edge_index), so a file can only name edges the graph has; it
 * fills a scratch array and copies it out only when the whole file has
 * passed, so a refused file assigns nothing. Every string echoed in a
 * message goes through al_json_key_disp: a hostile file cannot make a
 * message longer than a line. */
#include "attnlab/circuit_file.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/discover.h"
#include "attnlab/json.h"

/* ------------------------------------------------------------ writing */

/* cJSON_Add*ToObject returns NULL when out of memory; so does this. */
static cJSON *add_num(cJSON *o, const char *k, double v) {
    cJSON *n = al_json_num_item(v);
    if (n && !cJSON_AddItemToObject(o, k, n)) {
        cJSON_Delete(n);
        return NULL;
    }
    return n;
}

static cJSON *add_str(cJSON *o, const char *k, const char *v) {
    return v ? cJSON_AddStringToObject(o, k, v) : cJSON_AddNullToObject(o, k);
}

static int add_edge(cJSON *arr, int L, int H, int k, double score) {
    al_edge ed;
    char snd[32], rcv[32];
    if (al_graph_edge(L, H, k, &ed)) return -1;
    al_graph_sender_name(H, ed.sender, snd, sizeof snd);
    if (ed.kind == AL_EDGE_OUTPUT)
        snprintf(rcv, sizeof rcv, "logits");
    else
        snprintf(rcv, sizeof rcv, "%d.%d", ed.recv_layer, ed.recv_head);
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(arr, o)) {
        cJSON_Delete(o);
        return -1;
    }
    return add_str(o, "sender", snd) && add_str(o, "receiver", rcv) &&
                   add_str(o, "channel", al_graph_channel_name(ed.channel)) &&
                   add_num(o, "score", score)
               ? 0
               : -1;
}

int al_circuit_format(const al_circuit_info *info, int L, int H, const unsigned char *kept,
                      const double *score, char **text, al_err *e) {
    *text = NULL;
    int n = al_graph_n_edges(L, H), n_kept = 0;
    if (!n)
        return al_errf(e, "circuit file: a %d-layer model has no head graph (1 to %d layers)", L,
                       AL_GRAPH_MAX_LAYERS);
    for (int k = 0; k < n; k++) n_kept += kept[k] != 0;
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    int ok = root && add_str(root, "format", AL_CIRCUIT_FORMAT) &&
             add_num(root, "version", AL_CIRCUIT_VERSION) &&
             add_str(root, "model_sha256", info->model_sha256) &&
             add_str(root, "task", info->task) && add_str(root, "method", info->method) &&
             add_str(root, "metric", info->metric) && add_num(root, "tau", info->tau) &&
             add_num(root, "recover", info->recover) &&
             add_num(root, "faithfulness", info->faithfulness) && add_num(root, "kl", info->kl) &&
             add_num(root, "run_id", info->run_id > 0 ? (double)info->run_id : NAN) &&
             add_num(root, "graph_edges", n) && add_num(root, "n_edges", n_kept) &&
             (arr = cJSON_AddArrayToObject(root, "edges"));
    for (int k = 0; ok && k < n; k++)
        if (kept[k] && add_edge(arr, L, H, k, score ? score[k] : NAN)) ok = 0;
    char *s = ok ? al_json_print(1, root) : NULL;
    cJSON_Delete(root);
    if (!s) return al_errf(e, "circuit file: out of memory");
    size_t len = strlen(s);
    char *t = realloc(s, len + 2); /* a text file ends in a newline */
    if (!t) {
        free(s);
        return al_errf(e, "circuit file: out of memory");
    }
    t[len] = '\n', t[len + 1] = 0;
    *text = t;
    return 0;
}

/* ------------------------------------------------------------ parsing */

/* "L.H" with 1..4 digits each (no sign, no spaces): 0 and the numbers,
 * else −1. Four digits bound the numbers far below INT_MAX. */
static int parse_lh(const char *s, int *l, int *h) {
    int v[2] = {0, 0};
    for (int part = 0; part < 2; part++) {
        int d = 0;
        while (*s >= '0' && *s <= '9' && d < 5) v[part] = v[part] * 10 + (*s++ - '0'), d++;
        if (d < 1 || d > 4) return -1;
        if (part == 0 && *s++ != '.') return -1;
    }
    if (*s) return -1;
    *l = v[0], *h = v[1];
    return 0;
}

/* A head l.h the model must have: 0, else −1 with e. */
static int check_head(int L, int H, int l, int h, const char *where, al_err *e) {
    if (l >= L)
        return al_errf(e, "%s: layer %d is not in the model (%d layer%s)", where, l, L,
                       L == 1 ? "" : "s");
    if (h >= H)
        return al_errf(e, "%s: head %d.%d is not in the model (%d head%s)", where, l, h, H,
                       H == 1 ? "" : "s");
    return 0;
}

/* A required string field of edge object o. */
static const char *edge_str(const cJSON *o, const char *k, const char *where, al_err *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v) return al_errf(e, "%s: missing \"%s\"", where, k), NULL;
    if (!cJSON_IsString(v)) return al_errf(e, "%s: \"%s\" must be a string", where, k), NULL;
    return v->valuestring;
}

/* Edge object o (edges[i]) to its index in the graph, or −1 with e. */
static int parse_edge(const cJSON *o, int i, int L, int H, al_err *e) {
    char where[48], d[64];
    snprintf(where, sizeof where, "edges[%d]", i);
    if (!cJSON_IsObject(o)) return al_errf(e, "%s: must be an object", where);
    const char *snd = edge_str(o, "sender", where, e), *rcv, *ch;
    if (!snd || !(rcv = edge_str(o, "receiver", where, e)) ||
        !(ch = edge_str(o, "channel", where, e)))
        return -1;
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "score");
    if (!sc) return al_errf(e, "%s: missing \"score\"", where);
    if (!cJSON_IsNumber(sc) && !cJSON_IsNull(sc))
        return al_errf(e, "%s: \"score\" must be a number or null", where);
    al_edge ed;
    int l, h;
    if (!strcmp(snd, "embed") || !strcmp(snd, "pos"))
        ed.sender = snd[0] == 'p';
    else if (parse_lh(snd, &l, &h))
        return al_errf(e, "%s: sender '%s' is not embed, pos or a head L.H", where,
                       al_json_key_disp(snd, d));
    else if (check_head(L, H, l, h, where, e))
        return -1;
    else
        ed.sender = 2 + l * H + h;
    ed.channel = -1;
    for (int c = 0; c < 4; c++)
        if (!strcmp(ch, al_graph_channel_name(c))) ed.channel = c;
    if (ed.channel < 0)
        return al_errf(e, "%s: unknown channel '%s' (q, k, v or direct)", where,
                       al_json_key_disp(ch, d));
    if (!strcmp(rcv, "logits"))
        ed.kind = AL_EDGE_OUTPUT, ed.recv_layer = ed.recv_head = -1;
    else if (parse_lh(rcv, &l, &h))
        return al_errf(e, "%s: receiver '%s' is not logits or a head L.H", where,
                       al_json_key_disp(rcv, d));
    else if (check_head(L, H, l, h, where, e))
        return -1;
    else {
        ed.kind = ed.sender < 2 ? AL_EDGE_INPUT : AL_EDGE_COMPOSITION;
        ed.recv_layer = l, ed.recv_head = h;
    }
    int k = al_graph_edge_index(L, H, &ed);
    if (k < 0) {
        char d2[64];
        return al_errf(e, "%s: %s -> %s (channel %s) is not an edge of the graph", where,
                       al_json_key_disp(snd, d), al_json_key_disp(rcv, d2),
                       al_graph_channel_name(ed.channel));
    }
    return k;
}

/* The header fields: 0 and *edges (its length checked), else −1 with e. */
static int parse_head(const cJSON *root, int n_graph, const cJSON **edges, al_err *e) {
    if (!cJSON_IsObject(root)) return al_errf(e, "a circuit file must be a JSON object");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "n_edges");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "edges");
    char d[64];
    double x;
    if (!f) return al_errf(e, "missing \"format\" (not a circuit file)");
    if (!cJSON_IsString(f) || strcmp(f->valuestring, AL_CIRCUIT_FORMAT))
        return al_errf(e, "format is %s%s%s, not \"" AL_CIRCUIT_FORMAT "\"",
                       cJSON_IsString(f) ? "\"" : "",
                       cJSON_IsString(f) ? al_json_key_disp(f->valuestring, d) : "not a string",
                       cJSON_IsString(f) ? "\"" : "");
    if (!v) return al_errf(e, "missing \"version\"");
    if (al_json_int_in(v, 1, 1e9, &x) || x != AL_CIRCUIT_VERSION)
        return al_errf(e, "circuit file version %s; this attnlab reads version %d",
                       cJSON_IsNumber(v) ? "unknown" : "not a number", AL_CIRCUIT_VERSION);
    if (!n) return al_errf(e, "missing \"n_edges\"");
    if (al_json_int_in(n, 0, n_graph, &x))
        return al_errf(e, "n_edges must be an integer 0..%d (the edges of the graph)", n_graph);
    if (!a) return al_errf(e, "missing \"edges\"");
    if (!cJSON_IsArray(a)) return al_errf(e, "\"edges\" must be an array");
    int len = cJSON_GetArraySize(a);
    if (len > n_graph) return al_errf(e, "%d edges listed; the graph has %d", len, n_graph);
    if (len != (int)x) return al_errf(e, "%d edges listed, n_edges says %d", len, (int)x);
    *edges = a;
    return 0;
}

int al_circuit_parse(const char *text, size_t n, int L, int H, unsigned char *kept, al_err *e) {
    int n_graph = al_graph_n_edges(L, H);
    if (!n_graph)
        return al_errf(e, "a %d-layer model has no head graph (1 to %d layers)", L,
                       AL_GRAPH_MAX_LAYERS);
    cJSON *root = NULL;
    const cJSON *edges = NULL;
    if (al_json_parse(text, n, NULL, &root, e)) return -1;
    int rc = -1;
    /* where each edge was listed (+1; 0: not yet), so a repeat names both */
    int *at =
        parse_head(root, n_graph, &edges, e) ? NULL : al_calloc((size_t)n_graph, sizeof *at, e);
    if (!at) goto out;
    int i = 0;
    for (const cJSON *o = edges->child; o; o = o->next, i++) {
        int k = parse_edge(o, i, L, H, e);
        if (k < 0) goto out;
        if (at[k]) {
            char nm[64];
            al_errf(e, "edges[%d]: %s is listed twice (also edges[%d])", i,
                    al_graph_edge_name(L, H, k, nm, sizeof nm), at[k] - 1);
            goto out;
        }
        at[k] = i + 1;
    }
    for (int k = 0; k < n_graph; k++) kept[k] = at[k] != 0;
    rc = 0;
out:
    free(at);
    cJSON_Delete(root);
    return rc;
}

int al_circuit_load(const char *path, int L, int H, unsigned char *kept, al_err *e) {
    unsigned char *d = NULL;
    size_t n = 0;
    if (al_read_file(path, &d, &n, AL_CIRCUIT_MAX_BYTES, e)) return -1; /* names the path */
    int rc = al_circuit_parse((const char *)d, n, L, H, kept, e);
    free(d);
    return rc ? al_err_prefix(e, "%s", path) : 0;
}
