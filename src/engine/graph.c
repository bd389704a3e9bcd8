/* graph.c -- the head graph's edge indices and names (graph.h). */
#include <stdio.h>

#include "attnlab/graph.h"

int al_graph_n_edges(int L, int H) {
    if (L < 1 || L > AL_GRAPH_MAX_LAYERS || H < 1 || H > 4096) return 0;
    return al_graph_k_out(L, H, 2 + L * H);
}

int al_graph_edge(int L, int H, int k, al_edge *out) {
    int n = al_graph_n_edges(L, H), n_in = 6 * L * H, n_comp = al_graph_k_out(L, H, 0) - n_in;
    if (k < 0 || k >= n) return -1;
    al_edge ed;
    if (k < n_in) {
        ed.kind = AL_EDGE_INPUT, ed.sender = k % 2, ed.channel = k / 2 % 3;
        ed.recv_head = k / 6 % H, ed.recv_layer = k / 6 / H;
    } else if (k < n_in + n_comp) {
        int l1 = 1; /* the receiver layer: its block starts at al_graph_k_comp(.., 0, l1, 0, 0) */
        while (l1 + 1 < L && k >= al_graph_k_comp(L, H, 0, l1 + 1, 0, 0)) l1++;
        int j = k - al_graph_k_comp(L, H, 0, l1, 0, 0);
        ed.kind = AL_EDGE_COMPOSITION, ed.channel = j % 3, ed.recv_head = j / 3 % H;
        ed.sender = 2 + j / 3 / H, ed.recv_layer = l1;
    } else {
        ed.kind = AL_EDGE_OUTPUT, ed.sender = k - n_in - n_comp;
        ed.recv_layer = ed.recv_head = -1, ed.channel = 3;
    }
    *out = ed;
    return 0;
}

int al_graph_edge_index(int L, int H, const al_edge *ed) {
    if (!al_graph_n_edges(L, H) || !ed) return -1;
    int l = ed->recv_layer, h = ed->recv_head, c = ed->channel, s = ed->sender;
    switch (ed->kind) {
    case AL_EDGE_INPUT:
        if (s < 0 || s > 1 || l < 0 || l >= L || h < 0 || h >= H || c < 0 || c > 2) return -1;
        return al_graph_k_input(H, l, h, c, s);
    case AL_EDGE_COMPOSITION:
        if (l < 1 || l >= L || s < 2 || s >= 2 + l * H || h < 0 || h >= H || c < 0 || c > 2)
            return -1;
        return al_graph_k_comp(L, H, s - 2, l, h, c);
    case AL_EDGE_OUTPUT:
        if (l != -1 || h != -1 || c != 3 || s < 0 || s >= 2 + L * H) return -1;
        return al_graph_k_out(L, H, s);
    }
    return -1;
}

const char *al_graph_sender_name(int H, int s, char *buf, size_t cap) {
    if (s == 0)
        snprintf(buf, cap, "embed");
    else if (s == 1)
        snprintf(buf, cap, "pos");
    else
        snprintf(buf, cap, "%d.%d", (s - 2) / H, (s - 2) % H);
    return buf;
}

const char *al_graph_channel_name(int c) {
    static const char *const names[4] = {"q", "k", "v", "direct"};
    return c >= 0 && c < 4 ? names[c] : "?";
}

const char *al_graph_edge_name(int L, int H, int k, char *buf, size_t cap) {
    al_edge ed;
    char snd[32];
    if (al_graph_edge(L, H, k, &ed)) {
        snprintf(buf, cap, "?");
        return buf;
    }
    al_graph_sender_name(H, ed.sender, snd, sizeof snd);
    if (ed.kind == AL_EDGE_OUTPUT)
        snprintf(buf, cap, "%s->logits", snd);
    else
        snprintf(buf, cap, "%s->%d.%d.%c", snd, ed.recv_layer, ed.recv_head, "qkv"[ed.channel]);
    return buf;
}
