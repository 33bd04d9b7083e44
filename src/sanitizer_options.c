/*
 * sanitizer_options.c — defaults for the sanitizer build (test/run.sh --sanitize).
 *
 * The ASan runtime reaches postgres only through mlplat.so (preloading it into
 * postgres deadlocks at startup), so it must not insist on being loaded first.
 * The options are compiled in because a backend that loads the library late
 * cannot read ASAN_OPTIONS: PostgreSQL reuses the environment's memory for the
 * process title.  Reports go to stderr, which is the server log that
 * test/run.sh scans.  Leak checking is off: backends free by memory context and
 * exit without freeing, which LeakSanitizer would report as leaks.
 */
#include "postgres.h"

#include "access/xact.h"
#include "tcop/tcopprot.h"

#if defined(__SANITIZE_ADDRESS__)
#define MLPLAT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLPLAT_ASAN 1
#endif
#endif

#ifdef MLPLAT_ASAN
const char *__asan_default_options(void);

const char *
__asan_default_options(void)
{
	return "verify_asan_link_order=0:detect_leaks=0:handle_segv=0";
}

/* UBSan likewise: say where. */
const char *__ubsan_default_options(void);

const char *
__ubsan_default_options(void)
{
	return "print_stacktrace=1";
}
#endif

#include "mlplat/sanitizer.h"

#ifdef MLPLAT_ASAN
extern void __asan_handle_no_return(void);
extern void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#endif

/*
 * An ERROR leaves our frames by longjmp, and the runtime, which arrives with
 * mlplat.so after libc, does not intercept it: the frames' ASan shadow
 * (redzones, locals whose scope ended) stays where the next calls' frames
 * land, and a frame laid out differently is then reported for touching it.
 * Clear the stack's shadow as the interceptor would have.
 */
void
mlplat_sanitizer_before_error(void)
{
#ifdef MLPLAT_ASAN
	__asan_handle_no_return();
#endif
}

/*
 * After a longjmp has already happened the frames it left are below us, out
 * of __asan_handle_no_return's reach (it clears from the current frame up).
 * Clear the shadow of everything the stack may have held below this frame:
 * max_stack_depth plus a megabyte of margin.  The shadow
 * exists for every address; the stack pages themselves need not be mapped.
 */
void
mlplat_sanitizer_after_catch(void)
{
#ifdef MLPLAT_ASAN
	char *here = (char *) __builtin_frame_address(0);
	size_t depth = ((size_t) max_stack_depth + 1024) * 1024;

	__asan_unpoison_memory_region(here - depth, depth);
#endif
}

#ifdef MLPLAT_ASAN
/*
 * Every ERROR that is caught ends a transaction or a subtransaction: the
 * top-level catch aborts the transaction, a PL/pgSQL exception block (or any
 * savepoint) rolls back its subtransaction.  The callbacks below run then,
 * from the abort code under the catching frame, so they clear the shadow of
 * the whole stack -- below them (the frames the longjmp abandoned) and above
 * (live frames lose their redzones until they return: fewer reports, never a
 * false one) -- which covers errors raised anywhere, in our frames or in
 * PostgreSQL's called from them, without a call before each ereport.  Only
 * aborts pay, and only in this build.
 */
static void
clear_stack_shadow(void)
{
	mlplat_sanitizer_before_error();
	mlplat_sanitizer_after_catch();
}

static void
clear_after_abort(XactEvent event, void *arg)
{
	(void) arg;
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		clear_stack_shadow();
}

static void
clear_after_subabort(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid, void *arg)
{
	(void) mySubid;
	(void) parentSubid;
	(void) arg;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		clear_stack_shadow();
}
#endif

void
mlplat_sanitizer_init(void)
{
#ifdef MLPLAT_ASAN
	RegisterXactCallback(clear_after_abort, NULL);
	RegisterSubXactCallback(clear_after_subabort, NULL);
#endif
}
