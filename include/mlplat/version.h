/*
 * version.h — the library version (from mlplat.control, via the Makefile)
 * and a lookup of the installed extension's version.
 */
#ifndef MLPLAT_VERSION_H
#define MLPLAT_VERSION_H

#ifndef MLPLAT_VERSION
#error "MLPLAT_VERSION must be defined by the build"
#endif

/* palloc'd extversion of the installed extension in this database, or NULL */
extern char *mlplat_installed_version(void);

#endif /* MLPLAT_VERSION_H */
