/* SPDX-License-Identifier: MIT */
/*
 * choose: which measured fit autobatch recommends, and the facts behind
 * it (the runner-up and the margin, what --headroom excluded, when the
 * finalists must be measured again), apart from the loop so that the
 * policy has tests of its own; the callers word what these functions
 * return, and nothing here prints (choose.h has the rules).
 */
#include "control/choose.h"

#include "trial/gpu.h"

double choose_capacity(const struct gpu *g, const struct space *sp)
{
    double cap = g ? gpu_capacity(g) : -1;
    for (size_t i = 0; cap < 0 && i < sp->ncells; i++)
        if (sp->cells[i].search.capacity > 0)
            cap = sp->cells[i].search.capacity;
    return cap;
}

double choose_memory_limit(const struct gpu *g, const struct space *sp, double mem_limit)
{
    double cap = choose_capacity(g, sp);
    return cap > 0 ? cap : mem_limit > 0 ? mem_limit : -1;
}

void choose_collect_cells(const struct space *sp, struct results *res)
{
    /* The space is the last one searched (session_escalate starts a new
     * one for each knob it turns on): its trials are those of its
     * precision. */
    const struct results_trial *last = res->ntrials ? &res->trials[res->ntrials - 1] : NULL;
    for (size_t i = 0; i < sp->ncells; i++) {
        const struct cell *c = &sp->cells[i];
        /* The cell's trials as the results list them: the confirmation
         * run, which the search also records, is kept apart there. */
        long own = 0;
        for (size_t k = 0; k < res->ntrials; k++)
            own += res->trials[k].grad_accum == c->grad_accum &&
                   res->trials[k].checkpointing == c->checkpointing &&
                   res->trials[k].extra == last->extra;
        long mf = search_max_fit(&c->search);
        struct results_cell rc = {
            .grad_accum = c->grad_accum, .checkpointing = c->checkpointing, .max_fit = mf,
            .min_fail = search_min_fail(&c->search),
            /* With a global batch a cell has one size: "bounded" means nothing.
             * A pruned cell's search stopped before its boundary: its
             * largest fit is no limit either. */
            .bounded_by = c->pruned ? "pruned"
                        : c->fixed_micro < 0 && search_bounded(&c->search) ? "batch.max" : NULL,
            .skipped = c->state == CELL_SKIPPED || c->pruned ? c->skip_reason : NULL,
            .inferred = mf >= 0 && !search_tried(&c->search, mf), .trials = own,
        };
        rc.has_model = !search_model(&c->search, &rc.model_base, &rc.model_slope);
        results_add_cell(res, &rc);
        for (size_t k = 0; k < c->search.ncontra; k++) {
            const struct search_contradiction *x = &c->search.contra[k];
            struct results_contradiction rx = {
                c->grad_accum, c->checkpointing, x->value, x->larger_fit, x->retest_fit,
            };
            results_add_contradiction(res, &rx);
        }
    }
}

double choose_need(const struct results_trial *t, const struct space *sp)
{
    if (t->peak_mem_bytes >= 0)
        return (double)t->peak_mem_bytes;
    for (size_t i = 0; i < sp->ncells; i++) {
        const struct cell *c = &sp->cells[i];
        double a, b;
        if (c->grad_accum == t->grad_accum && c->checkpointing == t->checkpointing &&
            !search_model(&c->search, &a, &b))
            return a + b * (double)t->micro_batch;
    }
    return -1;
}

int choose_above_boundary(const struct results_trial *t, const struct space *sp)
{
    for (size_t i = 0; i < sp->ncells; i++) {
        const struct cell *c = &sp->cells[i];
        if (c->grad_accum == t->grad_accum && c->checkpointing == t->checkpointing)
            return t->micro_batch > search_max_fit(&c->search);
    }
    return 0;
}

/* 1 when t's memory is known to leave less than the headroom free. */
static int choose_too_big(const struct results_trial *t, const struct space *sp, double cap,
                          double headroom)
{
    double need = choose_need(t, sp);
    return headroom > 0 && need >= 0 && cap >= 0 && need > (1 - headroom) * cap;
}

long choose_best(struct results *res, const struct space *sp, double cap, double headroom,
                 struct choose_notes *notes)
{
    long best = -1;
    int unchecked = 0;
    for (size_t i = 0; i < res->ntrials; i++) {
        const struct results_trial *t = &res->trials[i];
        if (t->outcome != TRIAL_FIT || choose_above_boundary(t, sp))
            continue;
        if (headroom > 0) {
            double need = choose_need(t, sp);
            if (need < 0 || cap < 0)
                unchecked = 1;
            else if (need > (1 - headroom) * cap)
                continue;
        }
        if (best < 0) {
            best = (long)i;
            continue;
        }
        const struct results_trial *b = &res->trials[best];
        if (results_same_config(t, b))
            continue;
        double st = results_speed(res, t), sb = results_speed(res, b);
        int faster, tie;
        if (st < 0 || sb < 0) {
            /* No speeds: the larger micro-batch, then without
             * checkpointing, then less accumulation. */
            faster = st >= 0 ? 1 : sb >= 0 ? 0
                   : t->micro_batch != b->micro_batch ? t->micro_batch > b->micro_batch
                   : t->checkpointing != b->checkpointing ? t->checkpointing < b->checkpointing
                   : t->grad_accum < b->grad_accum;
            tie = 0;
        } else {
            tie = st <= sb * 1.01 && sb <= st * 1.01;
            faster = st > sb;
        }
        if (tie) {
            double nt = choose_need(t, sp), nb = choose_need(b, sp);
            int less = nt >= 0 && nb >= 0 ? nt < nb
                     : (t->micro_batch < b->micro_batch ||
                        (t->micro_batch == b->micro_batch && t->checkpointing > b->checkpointing));
            if (less)
                best = (long)i;
        } else if (faster) {
            best = (long)i;
        }
    }
    if (notes)
        notes->headroom_unchecked = unchecked;
    /* The configuration's trial that measured its speed stands for it (a
     * trial that ran beside others under --gpus has none). */
    for (size_t i = 0; best >= 0 && res->trials[best].samples_per_s <= 0 && i < res->ntrials; i++)
        if (res->trials[i].outcome == TRIAL_FIT && res->trials[i].samples_per_s > 0 &&
            results_same_config(&res->trials[i], &res->trials[best]))
            best = (long)i;
    /* The runner-up: the fastest other candidate that passed the same
     * filters, so the choice can say by how much it won. */
    res->runner_up = -1;
    for (size_t i = 0; best >= 0 && i < res->ntrials; i++) {
        const struct results_trial *t = &res->trials[i];
        if (t->outcome != TRIAL_FIT || t->samples_per_s <= 0 || choose_above_boundary(t, sp) ||
            results_same_config(t, &res->trials[best]) || choose_too_big(t, sp, cap, headroom))
            continue;
        if (res->runner_up < 0 ||
            results_speed(res, t) > results_speed(res, &res->trials[res->runner_up]))
            res->runner_up = (long)i;
    }
    return best;
}

int choose_repeat_noisy(struct results *res, struct space *sp, double cap, double headroom,
                        struct choose_repeat *out)
{
    long best = choose_best(res, sp, cap, headroom, NULL);
    if (best < 0 || res->runner_up < 0)
        return 0;
    const struct results_trial *b = &res->trials[best], *u = &res->trials[res->runner_up];
    double vb = results_speed(res, b), vu = results_speed(res, u);
    double sb = results_spread(b), su = results_spread(u), spread = sb > su ? sb : su;
    if (vb <= 0 || vu <= 0 || spread < 0 || vb / vu - 1 > spread || (sb <= 0.10 && su <= 0.10))
        return 0;
    int queued = 0;
    const struct results_trial *fin[2] = { b, u };
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sp->ncells; i++)
            if (sp->cells[i].grad_accum == fin[k]->grad_accum &&
                sp->cells[i].checkpointing == fin[k]->checkpointing &&
                !space_request(sp, i, fin[k]->micro_batch))
                queued++;
    if (queued && out) {
        out->best_micro = b->micro_batch;
        out->runner_micro = u->micro_batch;
        out->margin = vb / vu - 1;
        out->spread = spread;
    }
    return queued;
}

enum choose_verdict choose_margin(const struct results *res, struct choose_margin *m)
{
    m->verdict = CHOOSE_NO_MARGIN;
    m->best_speed = m->runner_speed = m->ratio = m->spread = -1;
    if (res->best < 0 || res->runner_up < 0 || res->trials[res->best].samples_per_s <= 0)
        return m->verdict;
    const struct results_trial *b = &res->trials[res->best], *u = &res->trials[res->runner_up];
    double sb = results_spread(b), su = results_spread(u);
    double vb = results_speed(res, b), vu = results_speed(res, u);
    if (vb <= 0 || vu <= 0)
        return m->verdict;
    int known = sb >= 0 && su >= 0;
    m->best_speed = vb;
    m->runner_speed = vu;
    m->ratio = vb / vu;
    m->spread = known ? (sb > su ? sb : su) : -1;
    if (vu > vb)
        m->verdict = CHOOSE_TIE;
    else if (known && vb / vu - 1 <= m->spread)
        m->verdict = CHOOSE_WITHIN_NOISE;
    else if (known)
        m->verdict = CHOOSE_FASTER;
    else
        m->verdict = CHOOSE_FASTER_UNKNOWN_SPREAD;
    return m->verdict;
}

size_t choose_excluded(const struct results *res, const struct space *sp, double cap,
                       double headroom, struct choose_excluded *x)
{
    x->n = 0;
    x->top = -1;
    x->need = -1;
    if (headroom <= 0 || cap <= 0)
        return 0; /* nothing excluded, or choose_best noted that it could not check */
    for (size_t i = 0; i < res->ntrials; i++) {
        const struct results_trial *t = &res->trials[i];
        double need = t->outcome == TRIAL_FIT ? choose_need(t, sp) : -1;
        if (need < 0 || need <= (1 - headroom) * cap || choose_above_boundary(t, sp))
            continue;
        int seen = 0;
        for (size_t k = 0; k < i && !seen; k++)
            seen = res->trials[k].outcome == TRIAL_FIT && results_same_config(&res->trials[k], t);
        if (seen)
            continue;
        x->n++;
        if (x->top < 0 || results_speed(res, t) > results_speed(res, &res->trials[x->top]))
            x->top = (long)i;
    }
    if (x->top >= 0)
        x->need = choose_need(&res->trials[x->top], sp);
    return x->n;
}
