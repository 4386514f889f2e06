/*
 * run_progress.c - progress bar, plain lines and the reward-curve SVG of
 * `arealctl run JOB.yaml` (see run_progress.h). SVG rather than PNG: a text
 * format needs no image library, opens in every browser, and diffs.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "run_progress.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int run_progress_init(run_progress *p, long total_steps, FILE *out, bool tty) {
    memset(p, 0, sizeof *p);
    p->total_steps = total_steps > 0 ? total_steps : 1;
    p->out = out;
    p->tty = tty;
    p->t0 = now_s();
    p->reward_at = malloc((size_t)(p->total_steps + 1) * sizeof *p->reward_at);
    p->acc_at = malloc((size_t)(p->total_steps + 1) * sizeof *p->acc_at);
    if (p->reward_at == NULL || p->acc_at == NULL)
        return -1;
    for (long i = 0; i <= p->total_steps; i++) {
        p->reward_at[i] = NAN;
        p->acc_at[i] = NAN;
    }
    return 0;
}

void run_progress_free(run_progress *p) {
    free(p->reward_at);
    free(p->acc_at);
}

static void show(run_progress *p) {
    double el = now_s() - p->t0;
    double eta = p->step > 0 ? el / (double)p->step * (double)(p->total_steps - p->step) : 0;
    char acc[32] = "  -  ";
    if (p->have_acc)
        snprintf(acc, sizeof acc, "%5.1f%%", 100 * p->acc);
    if (p->tty) {
        int width = 24, fill = (int)(width * p->step / p->total_steps);
        char bar[32];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        fprintf(p->out, "\r[%s] step %ld/%ld  reward %.3f  accuracy %s  %6.0f tok/s  ETA %4.0f s ",
                bar, p->step, p->total_steps, p->reward, acc, p->tokens_per_s, eta);
    } else {
        fprintf(p->out, "step %ld/%ld reward %.3f accuracy %s tokens/s %.0f eta %.0fs\n", p->step,
                p->total_steps, p->reward, acc, p->tokens_per_s, eta);
    }
    fflush(p->out);
}

static void line(run_progress *p, const char *s) {
    json_error_t je;
    json_t *d = json_loads(s, 0, &je);
    if (!json_is_object(d)) {
        json_decref(d);
        return; /* not a progress line: ignored */
    }
    long step = (long)json_integer_value(json_object_get(d, "step"));
    json_t *r = json_object_get(d, "reward_mean"), *a = json_object_get(d, "eval_accuracy");
    json_t *tps = json_object_get(d, "tokens_per_s");
    if (step >= 0 && step <= p->total_steps) {
        p->step = step;
        if (json_is_number(r)) {
            p->reward = json_number_value(r);
            p->reward_at[step] = p->reward;
        }
        if (json_is_number(a)) {
            p->acc = json_number_value(a);
            p->have_acc = true;
            p->acc_at[step] = p->acc;
            if (!p->have_first_acc) {
                p->first_acc = p->acc;
                p->have_first_acc = true;
            }
        }
        if (json_is_number(tps))
            p->tokens_per_s = json_number_value(tps);
        if (step + 1 > p->n)
            p->n = step + 1;
        /* plain output: every tenth of the run, and every evaluation */
        long every = p->total_steps >= 10 ? p->total_steps / 10 : 1;
        if (p->tty || step % every == 0 || json_is_number(a))
            show(p);
    }
    json_decref(d);
}

void run_progress_feed(run_progress *p, const char *data, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (data[i] == '\n') {
            p->partial[p->n_partial] = '\0';
            line(p, p->partial);
            p->n_partial = 0;
        } else if (p->n_partial + 1 < sizeof p->partial) {
            p->partial[p->n_partial++] = data[i];
        }
    }
}

void run_progress_end(run_progress *p) {
    if (p->tty) {
        fputc('\n', p->out);
        fflush(p->out);
    }
}

int run_progress_svg(const run_progress *p, const char *path, const char *title) {
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    const double W = 640, H = 360, L = 50, R = 20, T = 40, B = 40;
    double xs = (W - L - R) / (double)(p->total_steps > 0 ? p->total_steps : 1);
    double ys = H - T - B;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%.0f\" y=\"20\" font-size=\"14\">%s</text>\n",
            W, H, L, title);
    for (int k = 0; k <= 4; k++) {
        double y = T + ys * (1 - k / 4.0);
        fprintf(f,
                "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n",
                L, y, W - R, y, L - 6, y + 4, k / 4.0);
    }
    fprintf(f,
            "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step (0..%ld)</text>\n"
            "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"",
            (L + W - R) / 2, H - 10, p->total_steps);
    for (long i = 0; i < p->n; i++)
        if (!isnan(p->reward_at[i]))
            fprintf(f, "%.1f,%.1f ", L + xs * (double)i, T + ys * (1 - p->reward_at[i]));
    fprintf(f, "\"/>\n<polyline fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\" points=\"");
    for (long i = 0; i < p->n; i++)
        if (!isnan(p->acc_at[i]))
            fprintf(f, "%.1f,%.1f ", L + xs * (double)i, T + ys * (1 - p->acc_at[i]));
    fprintf(f, "\"/>\n");
    for (long i = 0; i < p->n; i++)
        if (!isnan(p->acc_at[i]))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#d62728\"/>\n",
                    L + xs * (double)i, T + ys * (1 - p->acc_at[i]));
    fprintf(f,
            "<text x=\"%.0f\" y=\"%.0f\" fill=\"#1f77b4\">reward (train, mean)</text>\n"
            "<text x=\"%.0f\" y=\"%.0f\" fill=\"#d62728\">held-out accuracy (greedy)</text>\n"
            "</svg>\n",
            W - R - 300, T + 14, W - R - 150, T + 14);
    return fclose(f) == 0 ? 0 : -1;
}
