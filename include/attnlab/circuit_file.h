/* circuit_file.h -- a discovered circuit as a JSON file (`attnlab
 * discover` writes DIR/circuit-<task>-<method>.json), and its parser.
 *
 * The format (version 1):
 *   {"format": "attnlab-circuit", "version": 1,
 *    "model_sha256": "<64 hex>", "task": "induction", "method": "acdc",
 *    "metric": "kl", "tau": 0.01, "recover": null,
 *    "faithfulness": 0.97, "kl": 0.004, "run_id": 7, "graph_edges": 306, "n_edges": 41,
 *    "edges": [{"sender": "0.3", "receiver": "1.2", "channel": "k",
 *               "score": 0.21}, ...]}
 * n_edges is the number of edges of the circuit, the length of "edges";
 * graph_edges the size of the whole head graph (discover.h), for a
 * reader's information. An edge: sender "embed", "pos" or "L.H";
 * receiver "L.H" or "logits"; channel "q", "k", "v" or "direct" (the
 * logits' only channel); score the discovery's score of that edge
 * (discover.h: ACDC's loss growth when tried, EAP's |estimate|; null if
 * it has none). tau is null for EAP, recover null for ACDC; numbers not
 * finite are written as null.
 *
 * Text in, text out: the parser does no file IO (the command writes the
 * text atomically; al_circuit_load reads a file through al_read_file and
 * hands its bytes over), so it can be fuzzed on bytes. */
#ifndef ATTNLAB_CIRCUIT_FILE_H
#define ATTNLAB_CIRCUIT_FILE_H

#include <stddef.h>
#include "attnlab/util.h"

#define AL_CIRCUIT_FORMAT "attnlab-circuit"
#define AL_CIRCUIT_VERSION 1

/* What the file says besides its edges. Strings are borrowed. */
typedef struct al_circuit_info {
    const char *model_sha256, *task, *method, *metric;
    double tau, recover; /* NaN: null (tau for eap, recover for acdc) */
    double faithfulness, kl;
    long long run_id; /* the discover run that found it (0: none; written as null) */
} al_circuit_info;

/* The file's text for the circuit kept[k] != 0 of an L-layer, H-head
 * graph (al_graph_n_edges(L, H) entries in kept and score; score may be
 * NULL: every score null), the kept edges in index order. 0 with *text
 * malloc'd (NUL-terminated, ending in a newline; the caller frees), or
 * −1 with e (a graph of no or more than AL_GRAPH_MAX_LAYERS layers, out of
 * memory). */
int al_circuit_format(const al_circuit_info *info, int L, int H, const unsigned char *kept,
                      const double *score, char **text, al_err *e);

/* Parse n bytes of a circuit file for an L-layer, H-head model into
 * kept (al_graph_n_edges(L, H) entries: 1 for each edge listed, else 0).
 * −1 with e one line naming the problem, and kept untouched: not JSON
 * (trailing bytes after the object included), not an object, format
 * other than AL_CIRCUIT_FORMAT, version other than AL_CIRCUIT_VERSION,
 * a missing or mistyped field (format, version, n_edges, edges; each
 * edge's sender, receiver, channel, score), more edges listed than the
 * graph has, a count of edges other than n_edges, an edge naming a layer or head the
 * model lacks, a channel other than q, k, v, direct, an edge the graph
 * does not have (1.2 -> 0.3.q, embed -> logits.q), the same edge twice.
 * A model deeper than AL_GRAPH_MAX_LAYERS has no graph: −1. */
int al_circuit_parse(const char *text, size_t n, int L, int H, unsigned char *kept, al_err *e);

/* al_circuit_parse on the file at path (at most AL_CIRCUIT_MAX_BYTES;
 * read with al_read_file), messages prefixed with the path. */
#define AL_CIRCUIT_MAX_BYTES (64u << 20)
int al_circuit_load(const char *path, int L, int H, unsigned char *kept, al_err *e);

#endif
