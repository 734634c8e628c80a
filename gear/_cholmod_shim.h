/* The few CHOLMOD calls of the native maximal-coordinate kernel
 * (gear/maximal/_kernel.pxd), behind one small handle.
 *
 * Built with CHOLMOD when meson finds libcholmod and <suitesparse/cholmod.h>
 * (Debian: libsuitesparse-dev) and defines GEAR_HAVE_CHOLMOD; otherwise every
 * function reports "unavailable" and the maximal solver keeps its
 * scikit-sparse path.
 *
 * A handle owns one cholmod_common and one factor.  The symmetric matrix is
 * given as one triangle in CSC form (int indices, sorted rows; stype -1 the
 * lower, +1 the upper triangle); its pattern arrays belong to the caller and
 * must outlive the handle, its values are passed to every factorisation.
 * The kernel analyses K once with a fill-reducing ordering, reads the
 * permutation (gear_chol_perm), and factorises the permuted upper triangle
 * with the natural ordering: CHOLMOD then neither transposes nor permutes
 * per call.  Threads each use their own handle (gear_chol_clone): one
 * cholmod_common per thread is CHOLMOD's rule for thread safety.
 */
#ifndef GEAR_CHOLMOD_SHIM_H
#define GEAR_CHOLMOD_SHIM_H

#include <stdlib.h>
#include <string.h>
#include <math.h>

typedef struct gear_chol gear_chol;

#ifdef GEAR_HAVE_CHOLMOD
#include <suitesparse/cholmod.h>

struct gear_chol {
    cholmod_common c;
    cholmod_factor *L;
    cholmod_sparse A;      /* lower triangle; x set per factorisation */
    cholmod_dense B;       /* right-hand side; x set per solve */
    cholmod_dense *X, *Y, *E;
    int n;
    int ordering;
    int stype;
};

static int gear_chol_available(void) { return 1; }

static void gear_chol_settings(gear_chol *h)
{
    cholmod_start(&h->c);
    h->c.print = 0;
    h->c.error_handler = NULL;
    h->c.supernodal = CHOLMOD_SIMPLICIAL;   /* LDL^T: D is read to test definiteness */
    h->c.final_ll = 0;
    if (h->ordering >= 0) {                 /* one given method (as scikit-sparse does) */
        h->c.nmethods = 1;
        h->c.method[0].ordering = h->ordering;
        h->c.postorder = h->ordering != CHOLMOD_NATURAL;   /* natural: keep the given order */
    } else if (h->ordering == -2) {         /* "best": try them all */
        h->c.nmethods = CHOLMOD_MAXMETHODS;
    }                                       /* -1: CHOLMOD's default strategy */
}

/* Symbolic analysis (fill-reducing ordering) of the n x n pattern (Ap, Ai).
 * status: 0, or CHOLMOD's status on failure (NULL returned). */
static gear_chol *gear_chol_new(int n, int *Ap, int *Ai, int stype, int ordering, int *status)
{
    gear_chol *h = (gear_chol *) calloc(1, sizeof(gear_chol));
    *status = 0;
    if (h == NULL) { *status = -2; return NULL; }
    h->n = n;
    h->ordering = ordering;
    h->stype = stype;
    gear_chol_settings(h);
    h->A.nrow = h->A.ncol = (size_t) n;
    h->A.nzmax = (size_t) Ap[n];
    h->A.p = Ap;
    h->A.i = Ai;
    h->A.nz = NULL;
    h->A.x = NULL;
    h->A.z = NULL;
    h->A.stype = stype;
    h->A.itype = CHOLMOD_INT;
    h->A.xtype = CHOLMOD_PATTERN;
    h->A.dtype = CHOLMOD_DOUBLE;
    h->A.sorted = 1;
    h->A.packed = 1;
    h->L = cholmod_analyze(&h->A, &h->c);
    h->A.xtype = CHOLMOD_REAL;
    if (h->L == NULL || h->c.status < 0) {
        *status = h->c.status < 0 ? h->c.status : -2;
        if (h->L) cholmod_free_factor(&h->L, &h->c);
        cholmod_finish(&h->c);
        free(h);
        return NULL;
    }
    h->B.nrow = (size_t) n;
    h->B.ncol = 1;
    h->B.nzmax = (size_t) n;
    h->B.d = (size_t) n;
    h->B.x = NULL;
    h->B.z = NULL;
    h->B.xtype = CHOLMOD_REAL;
    h->B.dtype = CHOLMOD_DOUBLE;
    return h;
}

/* A handle of its own (common, factor, workspaces) for another thread. */
static gear_chol *gear_chol_clone(const gear_chol *src)
{
    gear_chol *h;
    if (src == NULL) return NULL;
    h = (gear_chol *) calloc(1, sizeof(gear_chol));
    if (h == NULL) return NULL;
    h->n = src->n;
    h->ordering = src->ordering;
    h->stype = src->stype;
    gear_chol_settings(h);
    h->A = src->A;
    h->B = src->B;
    h->L = cholmod_copy_factor(src->L, &h->c);
    if (h->L == NULL) {
        cholmod_finish(&h->c);
        free(h);
        return NULL;
    }
    return h;
}

static void gear_chol_free(gear_chol *h)
{
    if (h == NULL) return;
    if (h->L) cholmod_free_factor(&h->L, &h->c);
    if (h->X) cholmod_free_dense(&h->X, &h->c);
    if (h->Y) cholmod_free_dense(&h->Y, &h->c);
    if (h->E) cholmod_free_dense(&h->E, &h->c);
    cholmod_finish(&h->c);
    free(h);
}

/* Numeric factorisation of A + beta I with the values Ax (the pattern's
 * nnz).  Returns 0 when every pivot is positive and finite, 1 when not
 * (numerically indefinite: raise beta), -1 on a CHOLMOD error. */
static int gear_chol_factor(gear_chol *h, double *Ax, double beta)
{
    double b[2];
    int j, n = h->n;
    b[0] = beta;
    b[1] = 0.0;
    h->A.x = Ax;
    if (!cholmod_factorize_p(&h->A, b, NULL, 0, h->L, &h->c) || h->c.status < 0)
        return -1;
    if (h->L->is_super) return -1;
    {
        const int *Lp = (const int *) h->L->p;
        const double *Lx = (const double *) h->L->x;
        if (h->L->is_ll && h->L->minor < (size_t) n) return 1;
        for (j = 0; j < n; j++) {
            double d = Lx[Lp[j]];
            if (!(d > 0.0) || !isfinite(d)) return 1;
        }
    }
    return 0;
}

/* x = (A + beta I)^{-1} b with the last factorisation (x may alias b). */
static int gear_chol_solve(gear_chol *h, const double *b, double *x)
{
    h->B.x = (void *) b;
    if (!cholmod_solve2(CHOLMOD_A, h->L, &h->B, NULL, &h->X, NULL, &h->Y, &h->E, &h->c))
        return -1;
    memcpy(x, h->X->x, (size_t) h->n * sizeof(double));
    return 0;
}

/* The fill-reducing permutation of the analysis: row perm[k] of the matrix
 * is row k of the factorised one. */
static void gear_chol_perm(const gear_chol *h, int *perm)
{
    int k;
    for (k = 0; k < h->n; k++)
        perm[k] = h->L->Perm ? ((const int *) h->L->Perm)[k] : k;
}

/* Non-zeros of the factor (unit diagonal of L counted, as L() reports). */
static long gear_chol_lnz(const gear_chol *h)
{
    long s = 0;
    int j;
    if (h == NULL || h->L == NULL) return 0;
    if (h->L->is_super) return (long) h->L->xsize;
    if (h->L->nz != NULL)                   /* numeric */
        for (j = 0; j < h->n; j++) s += ((const int *) h->L->nz)[j];
    else if (h->L->ColCount != NULL)        /* symbolic: the analysis' column counts */
        for (j = 0; j < h->n; j++) s += ((const int *) h->L->ColCount)[j];
    return s;
}

#else  /* no CHOLMOD at build time */

static int gear_chol_available(void) { return 0; }
static gear_chol *gear_chol_new(int n, int *Ap, int *Ai, int stype, int ordering, int *status)
{ (void) n; (void) Ap; (void) Ai; (void) stype; (void) ordering; *status = -99; return NULL; }
static void gear_chol_perm(const gear_chol *h, int *perm) { (void) h; (void) perm; }
static gear_chol *gear_chol_clone(const gear_chol *src) { (void) src; return NULL; }
static void gear_chol_free(gear_chol *h) { (void) h; }
static int gear_chol_factor(gear_chol *h, double *Ax, double beta)
{ (void) h; (void) Ax; (void) beta; return -1; }
static int gear_chol_solve(gear_chol *h, const double *b, double *x)
{ (void) h; (void) b; (void) x; return -1; }
static long gear_chol_lnz(const gear_chol *h) { (void) h; return 0; }

#endif
#endif
