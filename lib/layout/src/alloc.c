/*
 * alloc.c - the syntax pass of the allocation-string parser, and
 * areal_alloc_parse() which runs both passes (see areal/alloc.h).
 *
 * Design: a hand-written recursive-descent parser over the bytes, one
 * function per grammar rule (chain, group, single, hybrid, dims, name). The
 * grammar is not recursive (parentheses only wrap the hybrid form, one level
 * deep), so every loop consumes at least one byte per turn and the parser
 * runs in time linear in the input with constant stack. Whitespace is skipped
 * before each token. Each syntax error is reported at the byte where the
 * unexpected input starts, naming what was expected and an example.
 *
 * The syntax pass fills the written parts of each areal_component and an
 * alloc_spec with the raw dimension letters; alloc_rules.c derives the
 * strategies and checks the rules once the whole string is known. Legacy
 * forms (the dot after sglang/vllm, realhf's `m` letter) set out->legacy
 * here; the `m` letter is accepted only where legacy forms could carry it
 * (bare dims and dot-form parts), not in current-grammar parts.
 */
#include "areal/alloc.h"

#include <stdio.h>
#include <string.h>

#include "alloc_scan.h"
#include "alloc_spec.h"

/* The hybrid form as written in examples. */
#define HYBRID_EXAMPLE "megatron:(attn:d4p2t2|ffn:d2p2t2e2)"

typedef struct alloc_parser {
    alloc_scan sc;
    areal_alloc *out;
    alloc_spec *spec; /* one per component of out */
    int n_groups;     /* "+"-separated parts seen so far */
    areal_error *err;
} alloc_parser;

/* Where a list of dimension letters is, for checking and for messages. */
typedef struct dims_ctx {
    const char *owner;    /* "sglang", "the attn section", ... */
    const char *letters;  /* the letters accepted here */
    const char *expected; /* the letters as a message lists them */
    const char *why;      /* extra hint for a letter not accepted here, or "" */
    const char *example;  /* a correct component */
} dims_ctx;

/* The alloc_letter of a dimension letter (realhf's `m` is tensor), or -1. */
static int letter_index(int c) {
    switch (c) {
    case 'd':
        return ALLOC_D;
    case 'p':
        return ALLOC_P;
    case 't':
    case 'm':
        return ALLOC_T;
    case 'c':
        return ALLOC_C;
    case 'e':
        return ALLOC_E;
    default:
        return -1;
    }
}

static bool is_upper_letter(int c) {
    return c == 'D' || c == 'T' || c == 'P' || c == 'C' || c == 'E';
}

static int bad_letter(alloc_parser *p, const dims_ctx *ctx, int at, int c) {
    if (c == 'm')
        return alloc_fail(p->err, at,
                          "'m' is realhf's old letter for tensor parallelism, accepted only in "
                          "legacy strings; write t instead, e.g. %s",
                          ctx->example);
    return alloc_fail(p->err, at, "'%c' is not allowed here: %s takes only %s%s; example: %s", c,
                      ctx->owner, ctx->expected, ctx->why, ctx->example);
}

/*
 * dims := (letter NUMBER)+ with letters from ctx. The list must be followed
 * by the end, '+', '|' or ')'; the caller checks which of them is legal.
 */
static int parse_dims(alloc_parser *p, const dims_ctx *ctx, alloc_dims *dims) {
    alloc_scan *sc = &p->sc;
    int count = 0;
    for (;;) {
        alloc_scan_skip_space(sc);
        int at = sc->pos;
        int c = alloc_scan_peek(sc);
        int letter = letter_index(c);
        if (letter < 0)
            break;
        if (strchr(ctx->letters, c) == NULL)
            return bad_letter(p, ctx, at, c);
        if (c == 'm')
            p->out->legacy = true;
        sc->pos++;
        alloc_scan_skip_space(sc);
        int value = 0;
        int rc = alloc_scan_number(sc, (char)c, AREAL_ALLOC_MAX_DIM, &value, p->err);
        if (rc != AREAL_OK)
            return rc;
        dims->size[letter] = value;
        dims->given[letter] = true;
        count++;
    }
    int c = alloc_scan_peek(sc);
    if (count > 0 && (c < 0 || c == '+' || c == '|' || c == ')'))
        return AREAL_OK;
    char found[16];
    alloc_scan_describe(sc, sc->pos, found, sizeof found);
    return alloc_fail(p->err, sc->pos,
                      "expected a dimension letter (%s) followed by a number, found %s%s; "
                      "example: %s",
                      ctx->expected, found,
                      is_upper_letter(c) ? " (dimension letters are lower case)" : "",
                      ctx->example);
}

/* "[" NAME "]" at the cursor, copied into `name` (AREAL_ALLOC_NAME_MAX bytes). */
static int parse_name(alloc_parser *p, char *name) {
    alloc_scan *sc = &p->sc;
    int open = sc->pos;
    char found[16];
    sc->pos++; /* '[' */
    alloc_scan_skip_space(sc);
    int start = sc->pos;
    int n = alloc_scan_word(sc);
    if (n == 0) {
        alloc_scan_describe(sc, start, found, sizeof found);
        return alloc_fail(p->err, start,
                          "expected a name after '[' (a letter or '_', then letters, digits or "
                          "'_'), found %s; example: fsdp[actor]:d4",
                          found);
    }
    if (n >= AREAL_ALLOC_NAME_MAX)
        return alloc_fail(p->err, start, "name is too long: %d bytes, at most %d", n,
                          AREAL_ALLOC_NAME_MAX - 1);
    memcpy(name, sc->text + start, (size_t)n);
    name[n] = '\0';
    if (!alloc_scan_accept(sc, ']')) {
        alloc_scan_describe(sc, sc->pos, found, sizeof found);
        return alloc_fail(p->err, sc->pos,
                          "expected ']' to close the name opened at %d (names hold only "
                          "letters, digits and '_'), found %s; example: fsdp[actor]:d4",
                          open, found);
    }
    return AREAL_OK;
}

/* Consumes the keyword `word` and then ':' ("attn:", "ffn:"). */
static int expect_section(alloc_parser *p, const char *word, const char *where) {
    alloc_scan *sc = &p->sc;
    char found[16];
    alloc_scan_skip_space(sc);
    if (alloc_scan_word_is(sc, word)) {
        sc->pos += (int)strlen(word);
        if (alloc_scan_accept(sc, ':'))
            return AREAL_OK;
    }
    alloc_scan_describe(sc, sc->pos, found, sizeof found);
    return alloc_fail(p->err, sc->pos, "expected '%s:' %s, found %s; example: %s", word, where,
                      found, HYBRID_EXAMPLE);
}

/* hybrid := ["("] "attn" ":" attndim+ "|" "ffn" ":" ffndim+ [")"] */
static int parse_hybrid(alloc_parser *p, alloc_spec *spec) {
    static const dims_ctx attn = {"the attn section", "dtpc", "d, t, p or c",
                                  " (e belongs in the ffn section)", HYBRID_EXAMPLE};
    static const dims_ctx ffn = {"the ffn section", "dtpe", "d, t, p or e",
                                 " (c belongs in the attn section)", HYBRID_EXAMPLE};
    alloc_scan *sc = &p->sc;
    char found[16];
    alloc_scan_skip_space(sc);
    int open = sc->pos;
    bool paren = alloc_scan_accept(sc, '(');
    int rc = expect_section(p, "attn", "to start the hybrid form");
    if (rc == AREAL_OK)
        rc = parse_dims(p, &attn, &spec->dims);
    if (rc != AREAL_OK)
        return rc;
    if (!alloc_scan_accept(sc, '|')) {
        alloc_scan_describe(sc, sc->pos, found, sizeof found);
        return alloc_fail(p->err, sc->pos,
                          "expected '|ffn:' after the attn dimensions, found %s; example: %s",
                          found, HYBRID_EXAMPLE);
    }
    rc = expect_section(p, "ffn", "after '|' in the hybrid form");
    if (rc == AREAL_OK)
        rc = parse_dims(p, &ffn, &spec->ffn);
    if (rc != AREAL_OK)
        return rc;
    if (paren && !alloc_scan_accept(sc, ')')) {
        alloc_scan_describe(sc, sc->pos, found, sizeof found);
        return alloc_fail(p->err, sc->pos, "expected ')' to close the '(' at %d, found %s", open,
                          found);
    }
    return AREAL_OK;
}

/* True when a letter-number pair starts at the cursor: a bare-dims component. */
static bool looks_like_dims(const alloc_scan *sc) {
    if (letter_index(alloc_scan_peek(sc)) < 0)
        return false;
    alloc_scan ahead = *sc;
    ahead.pos++;
    alloc_scan_skip_space(&ahead);
    int c = alloc_scan_peek(&ahead);
    return c >= '0' && c <= '9';
}

static bool same_word_ignoring_case(const char *word, int n, const char *name) {
    if ((int)strlen(name) != n)
        return false;
    for (int i = 0; i < n; i++) {
        int c = (unsigned char)word[i];
        if (c >= 'A' && c <= 'Z')
            c += 'a' - 'A';
        if (c != name[i])
            return false;
    }
    return true;
}

/* The backend spelled by the n bytes at `word`, or -1; `*case_only` when only the case differs. */
static int backend_of_word(const char *word, int n, bool *case_only) {
    static const areal_backend all[] = {AREAL_BACKEND_SGLANG, AREAL_BACKEND_VLLM,
                                        AREAL_BACKEND_FSDP, AREAL_BACKEND_MEGATRON,
                                        AREAL_BACKEND_ARCHON};
    *case_only = false;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *name = areal_backend_name(all[i]);
        if ((int)strlen(name) == n && memcmp(word, name, (size_t)n) == 0)
            return (int)all[i];
        if (same_word_ignoring_case(word, n, name))
            *case_only = true;
    }
    return -1;
}

static int unknown_backend(alloc_parser *p, int start, int n) {
    const char *word = p->sc.text + start;
    bool case_only = false;
    backend_of_word(word, n, &case_only);
    const char *hint = "";
    if (case_only)
        hint = " (backends are lower case)";
    else if (same_word_ignoring_case(word, n, "eval") || same_word_ignoring_case(word, n, "cpu"))
        hint = " (the '+eval' and '+cpu' parts were removed from AReaL; drop them)";
    return alloc_fail(p->err, start,
                      "unknown backend '%.*s%s': expected sglang, vllm, fsdp, megatron or "
                      "archon%s; example: sglang:d4t2+fsdp:d8",
                      n > 24 ? 24 : n, word, n > 24 ? "..." : "", hint);
}

/* The part after the backend (and name): ':' dims, ':' hybrid, or legacy '.' dims. */
static int parse_backend_body(alloc_parser *p, areal_component *comp, alloc_spec *spec,
                              int name_at) {
    alloc_scan *sc = &p->sc;
    const char *backend = areal_backend_name(comp->backend);
    bool inference = areal_backend_is_inference(comp->backend);
    char found[16];
    char example[48];
    snprintf(example, sizeof example, "%s:%s", backend,
             comp->backend == AREAL_BACKEND_MEGATRON ? "d2p2t4" : "d4t2");
    alloc_scan_skip_space(sc);
    int c = alloc_scan_peek(sc);
    if (c == '.' && inference && name_at < 0) {
        static const dims_ctx dotted = {"a legacy dot-form part", "dtpm", "d, t or p",
                                        " (c and e are for training backends)", "sglang:d4t2"};
        sc->pos++;
        p->out->legacy = true;
        return parse_dims(p, &dotted, &spec->dims);
    }
    if (c != ':') {
        alloc_scan_describe(sc, sc->pos, found, sizeof found);
        return alloc_fail(p->err, sc->pos, "expected ':' after %s%s, found %s; example: %s",
                          name_at >= 0 ? "the name" : backend,
                          c == '.' ? " (the dot form existed only for unnamed sglang and vllm)"
                                   : "",
                          found, example);
    }
    sc->pos++;
    alloc_scan_skip_space(sc);
    if (alloc_scan_peek(sc) == '(' || alloc_scan_word_is(sc, "attn")) {
        if (inference)
            return alloc_fail(p->err, sc->pos,
                              "%s cannot use the hybrid (attn|ffn) form, which is for training "
                              "backends; example: %s",
                              backend, HYBRID_EXAMPLE);
        if (name_at >= 0)
            return alloc_fail(p->err, name_at,
                              "the hybrid (attn|ffn) form takes no name in AReaL's grammar; drop "
                              "'[%s]', e.g. %s",
                              comp->name, HYBRID_EXAMPLE);
        comp->hybrid = true;
        return parse_hybrid(p, spec);
    }
    dims_ctx ctx = {backend, "dtpce", "d, t, p, c or e", "", example};
    if (inference) {
        ctx.letters = "dtp";
        ctx.expected = "d, t or p";
        ctx.why = " (c and e are for training backends)";
    }
    return parse_dims(p, &ctx, &spec->dims);
}

/*
 * single := BACKEND ["[" NAME "]"] ":" (dims | hybrid) | BACKEND "." dims (legacy)
 *         | dims (bare: judged by the rule pass) | "[" NAME "]" ... | hybrid (errors)
 */
static int parse_single(alloc_parser *p, const char *after) {
    static const dims_ctx bare = {"a part without a backend", "dtpcem", "d, t, p, c or e", "",
                                  "fsdp:d4t2"};
    alloc_scan *sc = &p->sc;
    char found[16];
    alloc_scan_skip_space(sc);
    int start = sc->pos;
    int c = alloc_scan_peek(sc);
    if (!alloc_scan_is_word_start(c) && c != '[' && c != '(') {
        alloc_scan_describe(sc, start, found, sizeof found);
        return alloc_fail(p->err, start,
                          "expected a component%s, found %s; a component is a backend and its "
                          "sizes, e.g. sglang:d4t2 or fsdp:d8",
                          after, found);
    }
    if (p->out->n_components == AREAL_ALLOC_MAX_COMPONENTS)
        return alloc_fail(p->err, start, "too many components: at most %d",
                          AREAL_ALLOC_MAX_COMPONENTS);

    int idx = p->out->n_components;
    areal_component *comp = &p->out->comp[idx];
    alloc_spec *spec = &p->spec[idx];
    memset(comp, 0, sizeof *comp);
    memset(spec, 0, sizeof *spec);
    for (int i = 0; i < ALLOC_LETTER_COUNT; i++)
        spec->dims.size[i] = spec->ffn.size[i] = 1;
    comp->strategy = areal_strategy_single();
    comp->sched = AREAL_SCHED_SEPARATION;
    comp->colocate_with = -1;
    comp->pos = start;

    int rc;
    if (c == '[') {
        rc = parse_name(p, comp->name);
        if (rc == AREAL_OK)
            rc = alloc_fail(p->err, start,
                            "'[%s]' has no backend; put one in front, e.g. fsdp[%s]:d4 or "
                            "megatron[%s]:d2p2t4",
                            comp->name, comp->name, comp->name);
        return rc;
    }
    if (c == '(' || alloc_scan_word_is(sc, "attn"))
        return alloc_fail(p->err, start,
                          "the hybrid (attn|ffn) form needs a backend in front; example: %s",
                          HYBRID_EXAMPLE);
    if (looks_like_dims(sc)) {
        spec->bare = true;
        rc = parse_dims(p, &bare, &spec->dims);
    } else {
        int n = alloc_scan_word(sc);
        bool case_only;
        int backend = backend_of_word(sc->text + start, n, &case_only);
        if (backend < 0)
            return unknown_backend(p, start, n);
        comp->backend = (areal_backend)backend;
        int name_at = -1;
        alloc_scan_skip_space(sc);
        if (alloc_scan_peek(sc) == '[') {
            name_at = sc->pos;
            rc = parse_name(p, comp->name);
            if (rc != AREAL_OK)
                return rc;
        }
        rc = parse_backend_body(p, comp, spec, name_at);
    }
    if (rc != AREAL_OK)
        return rc;
    int end = sc->pos; /* may include whitespace skipped after the last token */
    while (end > start && alloc_scan_is_space(alloc_scan_byte_at(sc, end - 1)))
        end--;
    comp->len = end - start;
    p->out->n_components++;
    return AREAL_OK;
}

/* group := single ("|" single)*: the first is the anchor, the others colocate with it. */
static int parse_group(alloc_parser *p, const char *after) {
    int anchor = p->out->n_components;
    int rc = parse_single(p, after);
    while (rc == AREAL_OK && alloc_scan_accept(&p->sc, '|')) {
        rc = parse_single(p, " after '|'");
        if (rc == AREAL_OK) {
            areal_component *member = &p->out->comp[p->out->n_components - 1];
            member->sched = AREAL_SCHED_COLOCATION;
            member->colocate_with = anchor;
        }
    }
    return rc;
}

/* start := group ("+" group)* followed by the end of the string. */
static int parse_chain(alloc_parser *p) {
    alloc_scan *sc = &p->sc;
    char found[16];
    alloc_scan_skip_space(sc);
    if (alloc_scan_peek(sc) < 0)
        return alloc_fail(p->err, sc->pos,
                          "empty allocation string; expected components such as "
                          "sglang:d4t2+fsdp:d8");
    const char *after = "";
    for (;;) {
        int rc = parse_group(p, after);
        if (rc != AREAL_OK)
            return rc;
        p->n_groups++;
        if (alloc_scan_accept(sc, '+')) {
            after = " after '+'";
            continue;
        }
        alloc_scan_skip_space(sc);
        int c = alloc_scan_peek(sc);
        if (c < 0)
            return AREAL_OK;
        if (c == ')')
            return alloc_fail(p->err, sc->pos, "unmatched ')': no '(' is open here; example: %s",
                              HYBRID_EXAMPLE);
        alloc_scan_describe(sc, sc->pos, found, sizeof found);
        return alloc_fail(p->err, sc->pos,
                          "expected '+', '|' or the end of the string after a component, "
                          "found %s",
                          found);
    }
}

int areal_alloc_parse(const char *s, areal_alloc *out, areal_error *err) {
    areal_error_clear(err);
    if (s == NULL || out == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "no allocation string to parse (NULL argument)");
    size_t len = strnlen(s, (size_t)AREAL_ALLOC_MAX_LEN + 1);
    if (len > AREAL_ALLOC_MAX_LEN)
        return alloc_fail(err, AREAL_ALLOC_MAX_LEN, "allocation string is longer than %d bytes",
                          AREAL_ALLOC_MAX_LEN);

    alloc_spec spec[AREAL_ALLOC_MAX_COMPONENTS];
    alloc_parser p = {.out = out, .spec = spec, .n_groups = 0, .err = err};
    memset(out, 0, sizeof *out);
    alloc_scan_init(&p.sc, s, (int)len);
    int rc = parse_chain(&p);
    if (rc == AREAL_OK)
        rc = alloc_apply_rules(out, spec, p.n_groups, err);
    if (rc != AREAL_OK)
        return rc;
    if (out->legacy) {
        int need = areal_alloc_format(out, out->legacy_hint, (int)sizeof out->legacy_hint);
        if (need < 0 || need >= (int)sizeof out->legacy_hint)
            out->legacy_hint[0] = '\0';
    }
    return AREAL_OK;
}
