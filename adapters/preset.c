/* SPDX-License-Identifier: MIT */
/*
 * preset: loading preset files with libyaml's document API, and --knob
 * overrides (see preset.h).  The built-in presets are the files in
 * configs/presets/, compiled in by CMakeLists.txt as `ab_presets`.
 */
#include "preset.h"
#include "util/errbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct ab_preset_file {
    const char *name;
    const char *text;
};
extern const struct ab_preset_file ab_presets[];
extern const size_t ab_presets_count;

/* The order --preset auto tries them in: specific frameworks before the
 * generic ways, so that a Parler-TTS command is not taken for plain hf. */
static const char *const preset_order[] = {
    "f5-tts-finetune", "f5-tts", "parler-tts", "coqui", "orpheus", "espnet", "deepspeed", "lightning",
    "accelerate", "hf", "hydra", "json", "yaml", "env", NULL,
};

static const char *const knob_names[KNOB_COUNT] = {
    "micro_batch", "grad_accum", "checkpointing", "max_steps", "output_dir", "precision",
    "optim8bit", "sharding",
};

const char *preset_knob_name(enum knob_id id)
{
    return (unsigned)id < KNOB_COUNT ? knob_names[id] : NULL;
}

const char *const *preset_builtin_names(void)
{
    return preset_order;
}

static int preset_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int preset_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    errbuf_vset(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ------------------------------------------------------------ yaml nodes */

static const char *node_str(yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *node_get(yaml_document_t *d, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *k = node_str(yaml_document_get_node(d, p->key));
        if (k && !strcmp(k, key))
            return yaml_document_get_node(d, p->value);
    }
    return NULL;
}

/* A scalar or a sequence of scalars, as a malloc'd array of copies. */
static int node_strings(yaml_document_t *d, yaml_node_t *n, char ***out, size_t *count)
{
    *out = NULL;
    *count = 0;
    if (!n)
        return 0;
    if (n->type == YAML_SCALAR_NODE) {
        *out = malloc(sizeof **out);
        if (!*out || !((*out)[0] = strdup(node_str(n))))
            return -1;
        *count = 1;
        return 0;
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return -1;
    size_t k = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    *out = calloc(k ? k : 1, sizeof **out);
    if (!*out)
        return -1;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        const char *s = node_str(yaml_document_get_node(d, *it));
        if (!s || !((*out)[(*count)++] = strdup(s)))
            return -1;
    }
    return 0;
}

static void strings_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int preset_dup(char **dst, const char *src)
{
    free(*dst);
    *dst = src ? strdup(src) : NULL;
    return src && !*dst ? -1 : 0;
}

/* ------------------------------------------------------------- parsing */

static const struct { const char *field; enum knob_via via; } via_fields[] = {
    { "flag", VIA_FLAG }, { "override", VIA_OVERRIDE }, { "key", VIA_CONFIG },
    { "accelerate_key", VIA_ACCELERATE }, { "env", VIA_ENV },
};

static int preset_knob_parse(yaml_document_t *d, yaml_node_t *n, struct preset_knob *k,
                             const char *origin, const char *name, char *err, size_t errlen)
{
    if (!n || n->type != YAML_MAPPING_NODE)
        return preset_fail(err, errlen, "%s: knobs.%s must be a mapping like {flag: --x}", origin, name);
    int found = 0;
    for (size_t i = 0; i < sizeof via_fields / sizeof *via_fields; i++) {
        const char *w = node_str(node_get(d, n, via_fields[i].field));
        if (!w)
            continue;
        if (found++)
            return preset_fail(err, errlen, "%s: knobs.%s names more than one place", origin, name);
        k->via = via_fields[i].via;
        if (preset_dup(&k->where, w))
            return preset_fail(err, errlen, "out of memory");
    }
    if (!found)
        return preset_fail(err, errlen,
                           "%s: knobs.%s needs one of flag, override, key, accelerate_key, env",
                           origin, name);
    if (k->via == VIA_FLAG && strncmp(k->where, "-", 1))
        return preset_fail(err, errlen, "%s: knobs.%s: a flag starts with '-'", origin, name);
    if (preset_dup(&k->unit, node_str(node_get(d, n, "unit"))))
        return preset_fail(err, errlen, "out of memory");
    const char *rj = node_str(node_get(d, n, "root_joined"));
    if (rj) {
        k->root_joined = !strcmp(rj, "true");
        if (!k->root_joined && strcmp(rj, "false"))
            return preset_fail(err, errlen, "%s: knobs.%s.root_joined must be true or false",
                               origin, name);
        if (k->root_joined && strcmp(name, "output_dir"))
            return preset_fail(err, errlen, "%s: knobs.%s: root_joined is for output_dir only",
                               origin, name);
    }
    yaml_node_t *sp = node_get(d, n, "spelling");
    if (sp) {
        char **v;
        size_t c;
        if (node_strings(d, sp, &v, &c) || c != 2) {
            strings_free(v, c);
            return preset_fail(err, errlen, "%s: knobs.%s.spelling must be [TRUE, FALSE]", origin, name);
        }
        free(k->spell_true);
        free(k->spell_false);
        k->spell_true = v[0];
        k->spell_false = v[1];
        free(v);
    }
    return 0;
}

static int preset_batch_parse(struct preset *p, const char *s)
{
    long a, b, c = 1;
    int n = sscanf(s, "%ld:%ld:%ld", &a, &b, &c);
    if (n < 2 || a < 1 || b < a || c < 1)
        return -1;
    p->batch_min = a;
    p->batch_max = b;
    p->batch_step = c;
    return 0;
}


static int preset_add_fixed(struct preset *p, const char *spec, const char *origin, char *err,
                            size_t errlen);

/* `progress:`, `trial_set:` and `config_fixed:` (see preset.h). */
static int preset_extras_parse(struct preset *p, yaml_document_t *d, yaml_node_t *root,
                               const char *origin, char *err, size_t errlen)
{
    yaml_node_t *pg = node_get(d, root, "progress");
    if (pg && pg->type != YAML_MAPPING_NODE)
        return preset_fail(err, errlen, "%s: progress must be a mapping", origin);
    if (pg) {
        struct { const char *field; char **dst; } f[] = {
            { "bar", &p->progress.bar }, { "unit", &p->progress.unit },
            { "postfix", &p->progress.postfix }, { "line", &p->progress.line },
        };
        for (size_t i = 0; i < sizeof f / sizeof *f; i++)
            if (preset_dup(f[i].dst, node_str(node_get(d, pg, f[i].field))))
                return preset_fail(err, errlen, "out of memory");
        const char *step = node_str(node_get(d, pg, "step"));
        if (step && strcmp(step, "update") && strcmp(step, "micro_batch"))
            return preset_fail(err, errlen, "%s: progress.step is 'update' (an optimizer step) "
                                            "or 'micro_batch'", origin);
        p->progress.step = step && !strcmp(step, "micro_batch") ? STEP_IS_MICRO_BATCH
                                                                 : STEP_IS_UPDATE;
    }
    if (preset_dup(&p->config_fixed, node_str(node_get(d, root, "config_fixed"))))
        return preset_fail(err, errlen, "out of memory");
    if (p->config_fixed && (strchr(p->config_fixed, '/') || !*p->config_fixed))
        return preset_fail(err, errlen, "%s: config_fixed is a file name in the working "
                                        "directory, not a path", origin);
    if (preset_dup(&p->unit_from, node_str(node_get(d, root, "unit_from"))))
        return preset_fail(err, errlen, "out of memory");
    yaml_node_t *rf = node_get(d, root, "refuse");
    if (rf && rf->type != YAML_SEQUENCE_NODE)
        return preset_fail(err, errlen, "%s: refuse must be a list", origin);
    for (yaml_node_item_t *it = rf ? rf->data.sequence.items.start : NULL;
         rf && it < rf->data.sequence.items.top; it++) {
        yaml_node_t *n = yaml_document_get_node(d, *it);
        const char *kn = node_str(node_get(d, n, "knob")), *key = node_str(node_get(d, n, "key"));
        const char *val = node_str(node_get(d, n, "value")), *why = node_str(node_get(d, n, "why"));
        int id = -1;
        for (int i = 0; kn && i < KNOB_COUNT; i++)
            if (!strcmp(kn, knob_names[i]))
                id = i;
        if (id < 0 || !key || !val || !why)
            return preset_fail(err, errlen, "%s: each refuse entry needs knob, key, value and why",
                               origin);
        struct preset_refusal *nr = realloc(p->refuse, (p->nrefuse + 1) * sizeof *nr);
        if (!nr)
            return preset_fail(err, errlen, "out of memory");
        p->refuse = nr;
        struct preset_refusal r = { id, strdup(key), strdup(val), strdup(why) };
        p->refuse[p->nrefuse++] = r;
        if (!r.key || !r.value || !r.why)
            return preset_fail(err, errlen, "out of memory");
    }
    char **sets = NULL;
    size_t nsets = 0;
    if (node_strings(d, node_get(d, root, "trial_set"), &sets, &nsets)) {
        strings_free(sets, nsets);
        return preset_fail(err, errlen, "%s: trial_set is a list of \"WHERE=VALUE\"", origin);
    }
    int rc = 0;
    for (size_t i = 0; i < nsets && !rc; i++)
        rc = preset_add_fixed(p, sets[i], origin, err, errlen);
    strings_free(sets, nsets);
    return rc;
}

int preset_parse(struct preset *p, const char *text, size_t len, const char *origin,
                 char *err, size_t errlen)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return preset_fail(err, errlen, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        int rc = preset_fail(err, errlen, "%s: line %zu: %s", origin,
                             parser.problem_mark.line + 1,
                             parser.problem ? parser.problem : "malformed YAML");
        yaml_parser_delete(&parser);
        return rc;
    }
    yaml_parser_delete(&parser);
    int rc = -1;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    const char *name = node_str(node_get(&doc, root, "name"));
    if (!root || root->type != YAML_MAPPING_NODE || !name) {
        preset_fail(err, errlen, "%s: a preset is a mapping with at least 'name'", origin);
        goto out;
    }
    if (preset_dup(&p->name, name) ||
        preset_dup(&p->summary, node_str(node_get(&doc, root, "summary"))))
        goto oom;
    yaml_node_t *det = node_get(&doc, root, "detect");
    if (node_strings(&doc, node_get(&doc, det, "command"), &p->detect_command, &p->ndetect_command) ||
        node_strings(&doc, node_get(&doc, det, "config_keys"), &p->detect_keys, &p->ndetect_keys) ||
        node_strings(&doc, node_get(&doc, det, "script"), &p->detect_script, &p->ndetect_script) ||
        node_strings(&doc, node_get(&doc, root, "config_args"), &p->config_args, &p->nconfig_args)) {
        preset_fail(err, errlen, "%s: detect.command, detect.config_keys, detect.script and "
                                 "config_args are lists of strings", origin);
        goto out;
    }
    const char *batch = node_str(node_get(&doc, root, "batch"));
    if (batch && preset_batch_parse(p, batch)) {
        preset_fail(err, errlen, "%s: batch '%s' is not MIN:MAX[:STEP]", origin, batch);
        goto out;
    }
    yaml_node_t *knobs = node_get(&doc, root, "knobs");
    if (knobs && knobs->type != YAML_MAPPING_NODE) {
        preset_fail(err, errlen, "%s: knobs must be a mapping", origin);
        goto out;
    }
    for (yaml_node_pair_t *pr = knobs ? knobs->data.mapping.pairs.start : NULL;
         knobs && pr < knobs->data.mapping.pairs.top; pr++) {
        const char *kn = node_str(yaml_document_get_node(&doc, pr->key));
        int id = -1;
        for (int i = 0; kn && i < KNOB_COUNT; i++)
            if (!strcmp(kn, knob_names[i]))
                id = i;
        if (id < 0) {
            preset_fail(err, errlen, "%s: unknown knob '%s'; knobs are micro_batch, grad_accum, "
                                     "checkpointing, max_steps, output_dir, precision, optim8bit, sharding", origin, kn ? kn : "?");
            goto out;
        }
        if (preset_knob_parse(&doc, yaml_document_get_node(&doc, pr->value), &p->knobs[id],
                              origin, kn, err, errlen))
            goto out;
    }
    yaml_node_t *der = node_get(&doc, root, "derived");
    if (der && der->type != YAML_SEQUENCE_NODE) {
        preset_fail(err, errlen, "%s: derived must be a list", origin);
        goto out;
    }
    for (yaml_node_item_t *it = der ? der->data.sequence.items.start : NULL;
         der && it < der->data.sequence.items.top; it++) {
        yaml_node_t *dn = yaml_document_get_node(&doc, *it);
        const char *key = node_str(node_get(&doc, dn, "key"));
        char **prod = NULL;
        size_t np = 0;
        if (!key || node_strings(&doc, node_get(&doc, dn, "product"), &prod, &np) || !np) {
            strings_free(prod, np);
            preset_fail(err, errlen, "%s: each derived entry needs key and product", origin);
            goto out;
        }
        struct preset_derived dv = { 0 };
        for (size_t i = 0; i < np; i++) {
            int bit = !strcmp(prod[i], "world_size") ? PRESET_WORLD_SIZE : 0;
            for (int k = 0; k < KNOB_COUNT; k++)
                if (!strcmp(prod[i], knob_names[k]))
                    bit = 1 << k;
            if (!bit) {
                preset_fail(err, errlen, "%s: derived %s: unknown factor '%s'", origin, key, prod[i]);
                strings_free(prod, np);
                goto out;
            }
            dv.factors |= bit;
        }
        strings_free(prod, np);
        struct preset_derived *nd = realloc(p->derived, (p->nderived + 1) * sizeof *nd);
        if (!nd)
            goto oom;
        p->derived = nd;
        if (preset_dup(&dv.key, key) || preset_dup(&dv.keep, node_str(node_get(&doc, dn, "keep")))) {
            free(dv.key);
            goto oom;
        }
        p->derived[p->nderived++] = dv;
    }
    if (preset_extras_parse(p, &doc, root, origin, err, errlen))
        goto out;
    rc = 0;
    goto out;
oom:
    preset_fail(err, errlen, "out of memory");
out:
    yaml_document_delete(&doc);
    return rc;
}

/* ------------------------------------------------------------- loading */

static int preset_is_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') || (n > 5 && !strcmp(s + n - 5, ".yaml")) ||
           (n > 4 && !strcmp(s + n - 4, ".yml"));
}

int preset_load(struct preset *p, const char *name_or_path, char *err, size_t errlen)
{
    if (!preset_is_path(name_or_path)) {
        for (size_t i = 0; i < ab_presets_count; i++)
            if (!strcmp(ab_presets[i].name, name_or_path))
                return preset_parse(p, ab_presets[i].text, strlen(ab_presets[i].text),
                                    name_or_path, err, errlen);
        char names[512] = "";
        for (size_t i = 0; preset_order[i]; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, preset_order[i], sizeof names - strlen(names) - 1);
        }
        return preset_fail(err, errlen, "unknown preset '%s'; use one of %s, auto, or a preset "
                                        "file", name_or_path, names);
    }
    FILE *f = fopen(name_or_path, "rb");
    if (!f)
        return preset_fail(err, errlen, "cannot read preset '%s': %s", name_or_path, strerror(errno));
    char *buf = malloc(65536);
    size_t n = buf ? fread(buf, 1, 65535, f) : 0;
    int big = !feof(f);
    fclose(f);
    if (!buf)
        return preset_fail(err, errlen, "out of memory");
    if (big) {
        free(buf);
        return preset_fail(err, errlen, "preset '%s' is larger than 64 KiB", name_or_path);
    }
    buf[n] = '\0';
    int rc = preset_parse(p, buf, n, name_or_path, err, errlen);
    free(buf);
    return rc;
}

/*
 * WHERE as in --knob: `--flag`, `env:VAR`, `key:PATH`, `override:PATH`,
 * `accelerate:PATH`, or a bare key path, which keeps the way `keep` has
 * when that takes a key path, else means a key in --config when
 * have_config, else a Hydra override.  Fills *k (via and where).
 */
static int preset_parse_where(const char *w, const struct preset_knob *keep, int have_config,
                              struct preset_knob *k)
{
    static const struct { const char *prefix; enum knob_via via; } prefixes[] = {
        { "env:", VIA_ENV }, { "key:", VIA_CONFIG }, { "override:", VIA_OVERRIDE },
        { "accelerate:", VIA_ACCELERATE },
    };
    enum knob_via via = VIA_NONE;
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        size_t n = strlen(prefixes[i].prefix);
        if (!strncmp(w, prefixes[i].prefix, n)) {
            via = prefixes[i].via;
            w += n;
        }
    }
    if (via == VIA_NONE && w[0] == '-')
        via = VIA_FLAG;
    if (via == VIA_NONE) {
        if (keep && (keep->via == VIA_OVERRIDE || keep->via == VIA_CONFIG ||
                     keep->via == VIA_ACCELERATE))
            via = keep->via;
        else
            via = have_config ? VIA_CONFIG : VIA_OVERRIDE;
    }
    if (!*w)
        return -1;
    k->via = via;
    return preset_dup(&k->where, w);
}

int preset_set_knob(struct preset *p, const char *spec, int have_config, char *err,
                    size_t errlen)
{
    const char *eq = strchr(spec, '=');
    int id = -1;
    for (int i = 0; eq && i < KNOB_COUNT; i++)
        if (strlen(knob_names[i]) == (size_t)(eq - spec) && !strncmp(spec, knob_names[i], (size_t)(eq - spec)))
            id = i;
    if (id < 0 || !eq[1])
        return preset_fail(err, errlen, "--knob '%s': expected NAME=WHERE with NAME one of "
                                        "micro_batch, grad_accum, checkpointing, max_steps, output_dir, precision, optim8bit, sharding", spec);
    struct preset_knob *k = &p->knobs[id];
    struct preset_knob keep = *k;
    keep.where = NULL;
    if (preset_parse_where(eq + 1, &keep, have_config, k))
        return preset_fail(err, errlen, "--knob '%s': WHERE is empty", spec);
    return 0;
}

static int preset_add_fixed(struct preset *p, const char *spec, const char *origin, char *err,
                            size_t errlen)
{
    const char *eq = strrchr(spec, '=');
    struct preset_fixed fx = { { 0 }, NULL };
    char *where = eq ? strndup(spec, (size_t)(eq - spec)) : NULL;
    int bad = !eq || !where || preset_parse_where(where, NULL, 0, &fx.way) ||
              fx.way.via == VIA_ACCELERATE;
    free(where);
    if (bad) {
        free(fx.way.where);
        return preset_fail(err, errlen, "%s: trial_set '%s': expected WHERE=VALUE with WHERE "
                                        "--flag, override:KEY, key:KEY or env:VAR", origin, spec);
    }
    struct preset_fixed *nf = realloc(p->fixed, (p->nfixed + 1) * sizeof *nf);
    if (!nf || !(fx.value = strdup(eq + 1))) {
        free(fx.way.where);
        if (nf)
            p->fixed = nf;
        return preset_fail(err, errlen, "out of memory");
    }
    p->fixed = nf;
    p->fixed[p->nfixed++] = fx;
    return 0;
}

int preset_uses_config(const struct preset *p)
{
    for (int i = 0; i < KNOB_COUNT; i++)
        if (p->knobs[i].via == VIA_CONFIG)
            return 1;
    for (size_t i = 0; i < p->nfixed; i++)
        if (p->fixed[i].way.via == VIA_CONFIG)
            return 1;
    return p->nderived > 0;
}

int preset_uses_accelerate(const struct preset *p)
{
    for (int i = 0; i < KNOB_COUNT; i++)
        if (p->knobs[i].via == VIA_ACCELERATE)
            return 1;
    return 0;
}

void preset_release(struct preset *p)
{
    free(p->name);
    free(p->summary);
    strings_free(p->detect_command, p->ndetect_command);
    strings_free(p->detect_keys, p->ndetect_keys);
    strings_free(p->detect_script, p->ndetect_script);
    strings_free(p->config_args, p->nconfig_args);
    for (int i = 0; i < KNOB_COUNT; i++) {
        free(p->knobs[i].where);
        free(p->knobs[i].unit);
        free(p->knobs[i].spell_true);
        free(p->knobs[i].spell_false);
    }
    for (size_t i = 0; i < p->nderived; i++) {
        free(p->derived[i].key);
        free(p->derived[i].keep);
    }
    free(p->derived);
    for (size_t i = 0; i < p->nfixed; i++) {
        free(p->fixed[i].way.where);
        free(p->fixed[i].value);
    }
    free(p->fixed);
    free(p->progress.bar);
    free(p->progress.unit);
    free(p->progress.postfix);
    free(p->progress.line);
    free(p->config_fixed);
    free(p->unit_from);
    for (size_t i = 0; i < p->nrefuse; i++) {
        free(p->refuse[i].key);
        free(p->refuse[i].value);
        free(p->refuse[i].why);
    }
    free(p->refuse);
    struct preset zero = PRESET_INIT;
    *p = zero;
}
