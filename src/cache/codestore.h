/*
 * codestore.h: the per-user cache's code directory (codestore.c): beside
 * the SQLite file <name>, a directory <name>.code holding one file a row,
 * named by its key, the row as a record (record.h).  A warm start reads
 * its kernels from here and opens no SQLite connection at all (SQLite's
 * own first statement in a new process costs more than the rest of a
 * warm start together; tj-bench's warm_start section).
 *
 * The SQLite file stays the record of the cache: every row is stored
 * there first, and its file here is a copy made after the row commits
 * (and again on an SQLite hit, for a file that lacks it).  A file here
 * without its row is removed by the sweep that follows every eviction; a
 * row without its file costs one SQLite lookup.  A file is trusted as the
 * SQLite file is: the directory and the file must be ours and writable by
 * nobody else (location.c), and the record must pass every check of
 * tj__record_decode against the request, key echoed, before its code is
 * handed on; one that fails is removed and is a miss.
 *
 * Thread-safe: every call is a few system calls on descriptors the store
 * does not change after it is opened.
 */
#ifndef TJ_CODESTORE_H
#define TJ_CODESTORE_H

#include "cache_api.h"

typedef struct tj__codestore tj__codestore;

/*
 * The code directory of the judged cache file name in the directory dirfd
 * (an O_PATH descriptor of the judged directory dir, as location.c keeps
 * it).  create: make it (mode 0700, 0770 with TJ_CACHE_GROUP) when it is
 * absent.  TJ_OK with *out; TJ_ENOENT when there is none (and none was
 * made); TJ_EPERM when it is refused (not ours, or writable by others:
 * msg says why); TJ_EIO, TJ_ENOMEM.
 */
int tj__codestore_open(int dirfd, const char *dir, const char *name,
                       unsigned flags, int create, tj__codestore **out,
                       char *msg, size_t len);
void tj__codestore_close(tj__codestore *s);

/* The directory's path, for messages. */
const char *tj__codestore_path(const tj__codestore *s);

/*
 * want's file: TJ_OK fills f (code_hash too; free it with tj__found_free).
 * TJ_ENOENT: there is none.  TJ_ECACHE: there was one, and it was refused
 * or failed a check: it was removed (unless the store is read-only) and
 * is never loaded; msg says why.  TJ_ENOMEM.
 */
int tj__codestore_get(tj__codestore *s, const tj__cache_row *want,
                      tj__found *f, char *msg, size_t len);
/* Write row's file unless it has one: under a temporary name, then renamed
 * into place, so that a reader sees all of it or nothing.  TJ_OK, or
 * TJ_EIO (nothing is left behind). */
int tj__codestore_put(tj__codestore *s, const tj__cache_row *row);
/* Remove key's file, if any. */
void tj__codestore_drop(tj__codestore *s, const char *key);
/* Remove every file whose key keep() says is gone (it returns 0), and
 * temporary files left over an hour ago by a process that died.  The
 * number of files removed. */
long tj__codestore_sweep(tj__codestore *s, int (*keep)(void *ctx,
                                                       const char *key),
                         void *ctx);

/*
 * Hits served from here, which the SQLite file is told of later: a
 * process that never opens SQLite appends "KEY HITS TIME" lines to the
 * directory's hits file in one write at close, and the next process that
 * opens the SQLite file for writing folds them into its rows (usage,
 * which eviction orders by).  A line that is not one is skipped.
 */
void tj__codestore_note_hits(tj__codestore *s, const char *const *keys,
                             const uint64_t *hits, size_t n);
/* The lines noted since the last call, taken out of the file (*keys and
 * *hits malloc'd, n each; the times in *when).  TJ_OK (n may be 0), or
 * TJ_ENOMEM. */
int tj__codestore_take_hits(tj__codestore *s, char (**keys)[TJ__KEY_HEX],
                            uint64_t **hits, int64_t **when, size_t *n);
/* The same lines, left in place: for a look at the cache (stats,
 * listings) that cannot fold them in itself. */
int tj__codestore_peek_hits(tj__codestore *s, char (**keys)[TJ__KEY_HEX],
                            uint64_t **hits, int64_t **when, size_t *n);

#endif /* TJ_CODESTORE_H */
