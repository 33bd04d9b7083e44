# mlplat — PGXS build.
#
# The install script is assembled from the ordered parts in sql/install/ so each
# part stays small and readable; sql/upgrade/ holds upgrade scripts and
# sql/frozen/ the full scripts of released versions (kept so the upgrade test can
# install an old version and update it).  Top-level sql/ + expected/ are the
# pg_regress suite, as in PostgreSQL's contrib modules.
#
# Upgrades: sql/upgrade/*.sql are frozen upgrade scripts between released
# versions (installed as they are).  The upgrade from the last release to the one
# in development is assembled from the ordered delta parts in
# sql/upgrade/<PREV>--<CUR>/: every change to sql/install/ that a database of
# the last release lacks is written there once more (ALTER TABLE, CREATE OR
# REPLACE FUNCTION, ...).  test/upgrade/run.sh proves that an updated database
# and a fresh install have identical catalogs.

EXTENSION   = mlplat
# The source tree.  pg_buildext (debian/rules) builds out of tree: make runs in
# a build directory with -f <source>/Makefile and PGXS finds sources by VPATH,
# so every path below is relative to the source tree and S is its prefix
# (empty for the usual in-tree build).
SRCDIR     := $(patsubst %/,%,$(dir $(firstword $(MAKEFILE_LIST))))
S          := $(if $(filter .,$(SRCDIR)),,$(SRCDIR)/)
EXTVERSION  = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(S)mlplat.control)
# The last released version: its full script is frozen in sql/frozen/, and the
# upgrade from it is assembled from sql/upgrade/$(PREV_VERSION)--$(EXTVERSION)/.
PREV_VERSION = 0.2.0

MODULE_big  = mlplat
SRCS        = $(sort $(patsubst $(S)%,%,$(shell find $(S)src -name '*.c')))

# The test build (make MLPLAT_TEST_KINDS=1; test/run.sh builds it) also runs the test
# kinds of test/kinds/: their C is linked in, and their SQL, the extension mlplat_test,
# is installed beside mlplat's (CREATE EXTENSION mlplat_test loads it; only the tests
# do).  A release build has neither.  The build remembers which it was in
# .mlplat-test-kinds: switching rebuilds the objects that differ (src/kinds.c,
# src/reconcile/registry.c), not the others.  Only a setting on make's command line
# counts: test/run.sh exports MLPLAT_TEST_KINDS for its scripts, and a package built
# from such a shell (test/e2e/package.sh, pg_buildext) must still be a release build.
ifneq ($(origin MLPLAT_TEST_KINDS),command line)
MLPLAT_TEST_KINDS := 0
endif
ifeq ($(MLPLAT_TEST_KINDS),1)
SRCS       += $(sort $(patsubst $(S)%,%,$(wildcard $(S)test/kinds/*.c)))
TEST_KINDS_CPPFLAGS = -DMLPLAT_TEST_KINDS
endif
$(shell echo '$(MLPLAT_TEST_KINDS)' | cmp -s - .mlplat-test-kinds || echo '$(MLPLAT_TEST_KINDS)' >.mlplat-test-kinds)
OBJS        = $(SRCS:.c=.o)

INSTALL_PARTS = $(sort $(wildcard $(S)sql/install/*.sql))
# The C side of the seam (seam.h), generated from the CREATE TYPEs of the install
# parts and of the test kinds' script (a release build compiles none of the latter's).
SEAM_SQL    = $(INSTALL_PARTS) $(sort $(wildcard $(S)test/kinds/*.sql))
SEAM_TYPES  = include/mlplat/seam_types.h
# The upgrade ends with the intent calls' rule of the install (99_entry_points.sql: every
# public function answering mlplat.accepted is SECURITY DEFINER with search_path pinned), the
# same file, so a call an upgrade part adds or redefines gets it as a fresh install's does.
UPGRADE_PARTS = $(sort $(wildcard $(S)sql/upgrade/$(PREV_VERSION)--$(EXTVERSION)/*.sql)) \
                $(S)sql/install/99_entry_points.sql

DATA_built  = $(EXTENSION)--$(EXTVERSION).sql $(EXTENSION)--$(PREV_VERSION)--$(EXTVERSION).sql
DATA        = $(patsubst $(S)%,%,$(wildcard $(S)sql/frozen/*.sql) $(wildcard $(S)sql/upgrade/*.sql))
EXTRA_CLEAN = $(DATA_built) $(SEAM_TYPES) results/ output_iso/ regression.diffs regression.out $(OBJS:.o=.d)

# pg_regress: every sql/*.sql is a test; "setup" runs first.
REGRESS_ALL  = $(sort $(basename $(notdir $(wildcard sql/*.sql))))
REGRESS      = $(filter setup,$(REGRESS_ALL)) $(filter-out setup,$(REGRESS_ALL))
REGRESS_OPTS = --load-extension=mlplat

# isolation specs live in test/isolation/{specs,expected}
ISOLATION      = $(sort $(basename $(notdir $(wildcard test/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=mlplat

# -Iinclude: the generated header include/mlplat/seam_types.h is in the build tree.
PG_CPPFLAGS = -I$(abspath $(SRCDIR))/include -Iinclude -DMLPLAT_VERSION='"$(EXTVERSION)"' $(TEST_KINDS_CPPFLAGS)
# Our code is warning-free; extra flags (sanitizers, coverage) come in through MLPLAT_CFLAGS.
# -MMD -MP: gcc writes src/.../x.d beside x.o, so an object is rebuilt when a header
# it includes changes (PGXS tracks no headers; a stale object with an old struct
# layout links silently).  In CFLAGS, not CPPFLAGS: the clang bitcode rule reads
# CPPFLAGS and would overwrite the .d files with .bc targets.
PG_CFLAGS   = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers \
              -Wno-sign-compare -MMD -MP $(MLPLAT_CFLAGS)
SHLIB_LINK  = -lcurl -lcrypto $(MLPLAT_LDFLAGS)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
-include $(OBJS:.o=.d)
# Out of tree, the object directories (src/http/, ...) do not exist yet.
ifneq ($(S),)
$(shell mkdir -p $(sort $(dir $(OBJS))))
endif
src/kinds.o src/reconcile/registry.o: .mlplat-test-kinds

# The header exists before the first compile (order-only: after it, the .d files say
# which objects include it).  Rewritten only when its text changes, so an edit of a
# function in sql/install/ recompiles nothing.
$(OBJS) $(OBJS:.o=.bc): | $(SEAM_TYPES)
$(SEAM_TYPES): $(S)scripts/seam_types.awk $(SEAM_SQL)
	@mkdir -p $(dir $@)
	@awk -f $(S)scripts/seam_types.awk $(SEAM_SQL) >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

ifeq ($(MLPLAT_TEST_KINDS),1)
install: install-test-kinds
.PHONY: install-test-kinds
install-test-kinds:
	$(INSTALL_DATA) $(S)test/kinds/mlplat_test.control $(wildcard $(S)test/kinds/mlplat_test--*.sql) '$(DESTDIR)$(datadir)/extension/'
endif

$(EXTENSION)--$(EXTVERSION).sql: $(INSTALL_PARTS) mlplat.control
	@{ echo "-- mlplat $(EXTVERSION): generated from sql/install/*.sql; edit the parts, not this file."; \
	   printf '%s\n' '\echo Use "CREATE EXTENSION mlplat" to load this file. \quit'; \
	   for f in $(INSTALL_PARTS); do echo; echo "-- ==== $${f#$(S)}"; cat $$f; done; } > $@

$(EXTENSION)--$(PREV_VERSION)--$(EXTVERSION).sql: $(UPGRADE_PARTS) mlplat.control
	@{ echo "-- mlplat $(PREV_VERSION) -> $(EXTVERSION): generated from sql/upgrade/$(PREV_VERSION)--$(EXTVERSION)/*.sql and sql/install/99_entry_points.sql."; \
	   printf '%s\n' '\echo Use "ALTER EXTENSION mlplat UPDATE" to load this file. \quit'; \
	   for f in $(UPGRADE_PARTS); do echo; echo "-- ==== $${f#$(S)}"; cat $$f; done; } > $@

# Everything (build, private install, throwaway cluster, every suite): see test/run.sh.
.PHONY: test test-sanitize
test:
	test/run.sh
test-sanitize:
	test/run.sh --sanitize

# Let scripts read the lists above (e.g. make -s print-REGRESS).
print-%:
	@echo $($*)
