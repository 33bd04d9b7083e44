/*
 * secret_file.h — a credential kept in a file (a bearer token, object store
 * keys) and read again only when the file changes: a projected service
 * account token or a rotated key is replaced in place, and the next request
 * must use the new one without a restart.
 *
 * "Changed" means another inode or device, size or modification time.  The
 * content is a secret: never logged, wiped when replaced or forgotten.
 *
 * Refused, with a log line and nothing read: a file that is not regular, not
 * owned by the server's user or root, or writable by its group or others
 * (checked on every refresh, so a chmod takes effect at once), and a file
 * larger than the caller's limit (never used cut short).
 */
#ifndef MLPLAT_SECRET_FILE_H
#define MLPLAT_SECRET_FILE_H

#include <sys/stat.h>

typedef struct MlplatSecretFile
{
	char *path;		/* TopMemoryContext: the file content came from */
	char *content;	/* TopMemoryContext, NUL-terminated; NULL: none */
	size_t size;	/* bytes allocated for content (wiped on forget) */
	struct stat st; /* of path when content was read */
	char *refused;	/* TopMemoryContext: why the file is refused now (logged once); NULL: not */
} MlplatSecretFile;

/* What the content must look like. */
typedef enum MlplatSecretShape
{
	MLPLAT_SECRET_ANY,	/* any bytes up to max (parsed by the caller) */
	MLPLAT_SECRET_TOKEN /* one line: trailing blanks trimmed, not empty */
} MlplatSecretShape;

/*
 * Make sf hold the current content of path (NULL or "": no file, sf holds
 * nothing).  Reads at most max bytes.  Returns NULL when sf is current, and
 * sets *changed (if given) when the content was just (re)read; otherwise a
 * palloc'd reason naming what ("registry token file") and the path, and sf
 * holds nothing.
 */
extern char *mlplat_secret_file_refresh(MlplatSecretFile *sf, const char *path,
										const char *what, size_t max,
										MlplatSecretShape shape, bool *changed);

/*
 * Why a credential file of this process is refused right now (the first of
 * them), or NULL: the worker shows it in mlplat.reconciler_health.
 */
extern const char *mlplat_secret_file_refusal(void);

/* Wipe and drop the content; the next refresh reads the file again. */
extern void mlplat_secret_file_forget(MlplatSecretFile *sf);

#endif /* MLPLAT_SECRET_FILE_H */
