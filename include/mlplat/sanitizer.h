/*
 * sanitizer.h — what backend code does for the sanitizer build
 * (test/run.sh --sanitize; src/sanitizer_options.c).
 */
#ifndef MLPLAT_SANITIZER_H
#define MLPLAT_SANITIZER_H

/*
 * Call right before raising an ERROR from frames that may have poisoned
 * stack (ASan) below the catching frame, e.g. a SQL function that reports
 * a refusal from a helper after other helpers have returned: it clears the
 * stack's shadow, which a longjmp leaves stale in this build.  Does nothing
 * in other builds.
 */
extern void mlplat_sanitizer_before_error(void);

/*
 * Call in a PG_CATCH block that handles the error instead of re-throwing it
 * (the workers' pass and leader-lock catches): the ERROR may have come from
 * frames deep below, whose stale shadow would otherwise make the next calls
 * that reuse that stack look like overflows.  Clears the abandoned stack below
 * the caller, as deep as a backend's stack may grow.  Does nothing in other
 * builds.
 */
extern void mlplat_sanitizer_after_catch(void);

/*
 * From _PG_init, in every backend that loads mlplat: clears the abandoned
 * stack's shadow whenever a transaction or subtransaction aborts, i.e. after
 * every caught ERROR (see sanitizer_options.c).  Does nothing in other builds.
 */
extern void mlplat_sanitizer_init(void);

#endif /* MLPLAT_SANITIZER_H */
