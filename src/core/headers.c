/*
 * headers.c: every header a source can include, found and hashed, so that
 * a changed header can never be served as the old code.
 *
 * The rule is to over-count: each include is looked for in every directory
 * that could supply it, whatever the compiler's search order, #if is
 * ignored, and anything the scanner cannot read (#include MACRO) makes
 * every file below the include directories count.  Over-counting costs a
 * cache miss; under-counting would serve stale code.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#define MAX_FILES 4096
#define MAX_BYTES (256ull << 20)
#define MAX_DEPTH 16

typedef struct identity {
  dev_t dev;
  ino_t ino;
} identity;

typedef struct pending {
  char *path;
  char *text;
  size_t len;
} pending;

typedef struct scan {
  XXH3_state_t state;
  char **quote_dirs, **dirs, **pre; /* -iquote; every other dir; -include */
  int nquote, ndirs, npre;
  const tj_header *mem;
  int nmem;
  identity *seen;
  size_t nseen;
  pending *work;
  size_t nwork, capwork;
  int computed;
  uint64_t bytes;
  int rc;
  char *why;
  size_t whylen;
} scan;

/* ------------------------------------------------------- hashing */

static void put_field(scan *sc, const void *data, size_t len)
{
  unsigned char prefix[8];
  for (int i = 0; i < 8; i++)
    prefix[i] = (unsigned char)((uint64_t)len >> (8 * i));
  XXH3_128bits_update(&sc->state, prefix, sizeof prefix);
  if (len)
    XXH3_128bits_update(&sc->state, data, len);
}

static void put_string(scan *sc, const char *s)
{
  put_field(sc, s ? s : "", s ? strlen(s) : 0);
}

static int fail(scan *sc, int rc, const char *fmt, const char *arg)
{
  if (sc->rc == TJ_OK) {
    snprintf(sc->why, sc->whylen, fmt, arg, strerror(errno));
    sc->rc = rc;
  }
  return rc;
}

/* ------------------------------------------------------- directories */

static int add_dir(char ***list, int *n, const char *dir)
{
  char **grown = realloc(*list, ((size_t)*n + 1) * sizeof **list);
  if (!grown)
    return TJ_ENOMEM;
  *list = grown;
  if (!(grown[*n] = strdup(*dir ? dir : ".")))
    return TJ_ENOMEM;
  (*n)++;
  return TJ_OK;
}

/* -I DIR, -IDIR, --include-path=DIR, --include-path DIR, and the clang
 * spellings of the other include options.  "=DIR" (sysroot-relative) is
 * taken both ways. */
static const struct {
  const char *flag;
  int kind; /* 0: a dir, 1: a quote dir, 2: a file included first */
} dir_options[] = {
  {"--include-path", 0}, {"--include-directory", 0}, {"-I", 0},
  {"-isystem", 0}, {"-idirafter", 0}, {"-cxx-isystem", 0},
  {"--system-include-path", 0}, {"-iquote", 1}, {"--pre-include", 2},
  {"-include", 2}, {"-imacros", 2},
  /* clang (the AMD compiler) reads "--include-path=DIR" as "--include"
   * with the file "-path=DIR"; both readings are hashed. */
  {"--include", 3},
};

static int add_option_path(scan *sc, int kind, const char *path)
{
  char ***list = kind == 0 ? &sc->dirs : kind == 1 ? &sc->quote_dirs : &sc->pre;
  int *n = kind == 0 ? &sc->ndirs : kind == 1 ? &sc->nquote : &sc->npre;
  int rc = add_dir(list, n, path);
  if (rc == TJ_OK && path[0] == '=' && path[1])
    rc = add_dir(list, n, path + 1);
  return rc;
}

static int dirs_from_argv(scan *sc, const char *const *argv, int argc)
{
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    for (size_t j = 0; j < sizeof dir_options / sizeof dir_options[0]; j++) {
      size_t n = strlen(dir_options[j].flag);
      if (strncmp(a, dir_options[j].flag, n) != 0)
        continue;
      int dashdash = dir_options[j].flag[1] == '-' && dir_options[j].kind != 3;
      /* --flag=VALUE or --flag VALUE; -flagVALUE or -flag VALUE, as clang
       * takes them ("-I=DIR" is sysroot-relative: both ways, above). */
      if (dashdash && a[n] && a[n] != '=')
        continue;
      const char *val = !a[n] ? NULL : dashdash ? a + n + 1 : a + n;
      if (!val && i + 1 < argc)
        val = argv[++i];
      if (val && add_option_path(sc, dir_options[j].kind == 3 ? 2 : dir_options[j].kind, val) != TJ_OK)
        return TJ_ENOMEM;
      if (dir_options[j].kind != 3 && strncmp(a, "--include", 9) != 0)
        break; /* the --include spellings go on to the clang reading */
    }
  }
  return TJ_OK;
}

/* The AMD compiler's clang reads these (tested: a header found only
 * through $CPATH compiles); NVRTC does not, and hashing them there costs
 * nothing.  An empty element is the working directory. */
static int dirs_from_env(scan *sc)
{
  static const char *const vars[] = {"CPATH", "CPLUS_INCLUDE_PATH"};
  for (size_t v = 0; v < 2; v++) {
    const char *val = getenv(vars[v]);
    put_string(sc, vars[v]);
    put_string(sc, val);
    for (const char *p = val; p && *p;) {
      size_t n = strcspn(p, ":");
      char *dir = strndup(p, n);
      if (!dir || add_dir(&sc->dirs, &sc->ndirs, dir) != TJ_OK) {
        free(dir);
        return TJ_ENOMEM;
      }
      free(dir);
      p += n + (p[n] == ':');
    }
  }
  return TJ_OK;
}

/* ------------------------------------------------------- files */

static int read_file(scan *sc, const char *path, struct stat *st, char **text)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG ||
                   errno == ELOOP
               ? TJ_ENOENT
               : fail(sc, TJ_EIO, "cannot read header %s: %s", path);
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    close(fd); /* a directory or a device is no header the compiler reads */
    return TJ_ENOENT;
  }
  sc->bytes += (uint64_t)st->st_size;
  if (sc->bytes > MAX_BYTES) {
    close(fd);
    errno = EFBIG;
    return fail(sc, TJ_ERANGE, "headers over 256 MiB in all, at %s: %s", path);
  }
  char *buf = malloc((size_t)st->st_size + 1);
  size_t got = 0;
  while (buf && got < (size_t)st->st_size) {
    ssize_t r = read(fd, buf + got, (size_t)st->st_size - got);
    if (r <= 0) {
      if (r < 0 && errno == EINTR)
        continue;
      break;
    }
    got += (size_t)r;
  }
  close(fd);
  if (!buf)
    return TJ_ENOMEM;
  if (got != (size_t)st->st_size) {
    free(buf);
    return fail(sc, TJ_EIO, "cannot read header %s: %s", path);
  }
  buf[got] = '\0';
  *text = buf;
  st->st_size = (off_t)got;
  return TJ_OK;
}

static long seen_index(const scan *sc, const struct stat *st)
{
  for (size_t i = 0; i < sc->nseen; i++)
    if (sc->seen[i].dev == st->st_dev && sc->seen[i].ino == st->st_ino)
      return (long)i;
  return -1;
}

/* Hash one candidate path: absent (nothing), an alias of a file already
 * seen (its index: #pragma once goes by file identity), or its bytes, and
 * then queue it to be scanned. */
static void consider(scan *sc, const char *path)
{
  struct stat st;
  char *text = NULL;
  if (sc->rc != TJ_OK || read_file(sc, path, &st, &text) != TJ_OK)
    return;
  long alias = seen_index(sc, &st);
  put_string(sc, path);
  if (alias >= 0) {
    char idx[32];
    snprintf(idx, sizeof idx, "alias %ld", alias);
    put_string(sc, idx);
    free(text);
    return;
  }
  put_field(sc, text, (size_t)st.st_size);
  identity *ids = realloc(sc->seen, (sc->nseen + 1) * sizeof *ids);
  if (sc->nseen + 1 > MAX_FILES || !ids) {
    if (ids)
      sc->seen = ids;
    free(text);
    errno = EMFILE;
    fail(sc, ids ? TJ_ERANGE : TJ_ENOMEM, "more than 4096 headers, at %s: %s",
         path);
    return;
  }
  sc->seen = ids;
  sc->seen[sc->nseen++] = (identity){st.st_dev, st.st_ino};
  if (sc->nwork == sc->capwork) {
    size_t cap = sc->capwork ? 2 * sc->capwork : 16;
    pending *w = realloc(sc->work, cap * sizeof *w);
    if (!w) {
      free(text);
      sc->rc = TJ_ENOMEM;
      return;
    }
    sc->work = w;
    sc->capwork = cap;
  }
  char *copy = strdup(path);
  if (!copy) {
    free(text);
    sc->rc = TJ_ENOMEM;
    return;
  }
  sc->work[sc->nwork++] = (pending){copy, text, (size_t)st.st_size};
}

static void consider_in(scan *sc, const char *dir, const char *name)
{
  char *path = NULL;
  if (asprintf(&path, "%s/%s", dir, name) < 0) {
    sc->rc = TJ_ENOMEM;
    return;
  }
  consider(sc, path);
  free(path);
}

/* Every place the compiler could find name: the includer's directory (for
 * "..."; in-memory text has none on disk), -iquote, every other dir. */
static void resolve(scan *sc, const char *name, int quoted, const char *dir)
{
  put_string(sc, quoted ? "\"" : "<");
  put_string(sc, name);
  if (name[0] == '/') {
    consider(sc, name);
    return;
  }
  if (quoted && dir)
    consider_in(sc, dir, name);
  for (int i = 0; quoted && i < sc->nquote; i++)
    consider_in(sc, sc->quote_dirs[i], name);
  for (int i = 0; i < sc->ndirs; i++)
    consider_in(sc, sc->dirs[i], name);
}

/* ------------------------------------------------------- the scanner */

/* Join lines ended by a backslash, as translation phase 2 does, so that a
 * directive split over lines reads as one. */
static char *splice_lines(const char *text, size_t len, size_t *outlen)
{
  char *out = malloc(len + 1), *o = out;
  if (!out)
    return NULL;
  for (size_t i = 0; i < len; i++) {
    if (text[i] == '\\') {
      size_t j = i + 1;
      while (j < len && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r'))
        j++;
      if (j < len && text[j] == '\n') {
        i = j;
        continue;
      }
    }
    *o++ = text[i];
  }
  *o = '\0';
  *outlen = (size_t)(o - out);
  return out;
}

/* Skip blanks and block comments within one line. */
static const char *skip_blank(const char *p, const char *eol)
{
  for (;;) {
    while (p < eol && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\f' ||
                       *p == '\v'))
      p++;
    if (p + 1 < eol && p[0] == '/' && p[1] == '*') {
      const char *end = p + 2;
      while (end + 1 < eol && !(end[0] == '*' && end[1] == '/'))
        end++;
      p = end + 1 < eol ? end + 2 : eol;
      continue;
    }
    return p;
  }
}

/* After an include word: "name" or <name>; anything else is computed. */
static void take_name(scan *sc, const char *p, const char *eol, const char *dir)
{
  p = skip_blank(p, eol);
  char close = p < eol && *p == '"' ? '"' : p < eol && *p == '<' ? '>' : 0;
  const char *end = close ? memchr(p + 1, close, (size_t)(eol - p - 1)) : NULL;
  if (!end || end == p + 1) {
    sc->computed = 1;
    return;
  }
  char *name = strndup(p + 1, (size_t)(end - p - 1));
  if (!name) {
    sc->rc = TJ_ENOMEM;
    return;
  }
  resolve(sc, name, close == '"', dir);
  free(name);
}

static int word_at(const char *p, const char *eol, const char *w)
{
  size_t n = strlen(w);
  return (size_t)(eol - p) >= n && memcmp(p, w, n) == 0 &&
         (p + n == eol || !(p[n] == '_' || (p[n] >= 'a' && p[n] <= 'z') ||
                            (p[n] >= 'A' && p[n] <= 'Z') ||
                            (p[n] >= '0' && p[n] <= '9')));
}

static void scan_line(scan *sc, const char *p, const char *eol, const char *dir)
{
  static const char *const words[] = {"include_next", "include", "import",
                                      "embed"};
  const char *q = skip_blank(p, eol);
  int hash = q < eol && *q == '#';
  if (!hash && q + 1 < eol && q[0] == '%' && q[1] == ':') /* digraph */
    q++, hash = 1;
  if (hash) {
    q = skip_blank(q + 1, eol);
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
      if (word_at(q, eol, words[i])) {
        take_name(sc, q + strlen(words[i]), eol, dir);
        break;
      }
  }
  for (const char *h = p; (h = memmem(h, (size_t)(eol - h), "__has_include", 13));) {
    h += 13;
    if (word_at(h, eol, "_next"))
      h += 5;
    const char *open = skip_blank(h, eol);
    if (open < eol && *open == '(')
      take_name(sc, open + 1, eol, dir);
    else
      sc->computed = 1;
  }
}

static void scan_text(scan *sc, const char *text, size_t len, const char *dir)
{
  size_t n = 0;
  char *s = splice_lines(text, len, &n);
  if (!s) {
    sc->rc = TJ_ENOMEM;
    return;
  }
  for (const char *p = s, *end = s + n; p < end && sc->rc == TJ_OK;) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol)
      eol = end;
    if (memchr(p, '#', (size_t)(eol - p)) || memchr(p, '%', (size_t)(eol - p)) ||
        memmem(p, (size_t)(eol - p), "__has_include", 13))
      scan_line(sc, p, eol, dir);
    p = eol + 1;
  }
  free(s);
}

/* Scan queued files until none is left; each file's quoted includes start
 * from its own directory. */
static void drain(scan *sc)
{
  while (sc->nwork > 0 && sc->rc == TJ_OK) {
    pending w = sc->work[--sc->nwork];
    char *slash = strrchr(w.path, '/');
    if (slash)
      *slash = '\0';
    scan_text(sc, w.text, w.len, slash ? (slash == w.path ? "/" : w.path) : ".");
    free(w.path);
    free(w.text);
  }
}

/* ------------------------------------------------------- computed includes */

static void hash_tree(scan *sc, const char *dir, int depth)
{
  struct dirent **names = NULL;
  int n = depth > MAX_DEPTH ? -1 : scandir(dir, &names, NULL, alphasort);
  for (int i = 0; i < n; i++) {
    const char *d = names[i]->d_name;
    if (sc->rc == TJ_OK && strcmp(d, ".") != 0 && strcmp(d, "..") != 0) {
      char *path = NULL;
      struct stat st;
      if (asprintf(&path, "%s/%s", dir, d) < 0)
        sc->rc = TJ_ENOMEM;
      else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        hash_tree(sc, path, depth + 1);
      else
        consider(sc, path);
      free(path);
    }
    free(names[i]);
  }
  free(names);
}

static void hash_all_dirs(scan *sc)
{
  put_string(sc, "every file below the include directories");
  for (int i = 0; i < sc->nquote; i++)
    hash_tree(sc, sc->quote_dirs[i], 0);
  for (int i = 0; i < sc->ndirs; i++)
    hash_tree(sc, sc->dirs[i], 0);
  for (size_t i = 0; i < sc->nwork; i++) { /* already hashed: no rescan */
    free(sc->work[i].path);
    free(sc->work[i].text);
  }
  sc->nwork = 0;
}

/* ------------------------------------------------------- the digest */

static void free_list(char **list, int n)
{
  for (int i = 0; i < n; i++)
    free(list[i]);
  free(list);
}

static void run_scan(scan *sc, const char *source, size_t source_len)
{
  put_field(sc, "in-memory", 9);
  for (int i = 0; i < sc->nmem; i++) {
    put_string(sc, sc->mem[i].name);
    put_string(sc, sc->mem[i].contents);
  }
  put_field(sc, "files", 5);
  for (int i = 0; i < sc->npre; i++) { /* -include FILE: cwd, then dirs */
    consider(sc, sc->pre[i]);
    resolve(sc, sc->pre[i], 1, NULL);
  }
  /* NVRTC looks for "..." next to the program's name, which is relative
   * to the working directory (the compiler sees "caller.hip": "."), and
   * next to an in-memory header's name: so those directories count. */
  scan_text(sc, source, source_len, ".");
  for (int i = 0; i < sc->nmem && sc->rc == TJ_OK; i++) {
    char *dir = strdup(sc->mem[i].name), *slash = dir ? strrchr(dir, '/') : NULL;
    if (!dir) {
      sc->rc = TJ_ENOMEM;
      break;
    }
    if (slash)
      *slash = '\0';
    scan_text(sc, sc->mem[i].contents, strlen(sc->mem[i].contents),
              slash ? (slash == dir ? "/" : dir) : ".");
    free(dir);
  }
  drain(sc);
  if (sc->computed && sc->rc == TJ_OK)
    hash_all_dirs(sc);
}

int tj__headers_digest(const char *source, size_t source_len,
                       const tj_header *mem, int nmem,
                       const char *const *argv, int argc,
                       char digest[TJ__KEY_HEX], char *why, size_t whylen)
{
  scan *sc = calloc(1, sizeof *sc);
  if (!sc)
    return TJ_ENOMEM;
  XXH3_INITSTATE(&sc->state);
  XXH3_128bits_reset(&sc->state);
  sc->mem = mem;
  sc->nmem = nmem;
  sc->why = why;
  sc->whylen = whylen;
  why[0] = '\0';
  sc->rc = dirs_from_argv(sc, argv, argc);
  if (sc->rc == TJ_OK)
    sc->rc = dirs_from_env(sc);
  if (sc->rc == TJ_OK)
    run_scan(sc, source, source_len);
  int rc = sc->rc;
  if (rc == TJ_OK) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&sc->state));
    for (size_t i = 0; i < sizeof c.digest; i++)
      snprintf(digest + 2 * i, 3, "%02x", c.digest[i]);
  } else if (rc == TJ_ENOMEM && !why[0]) {
    snprintf(why, whylen, "out of memory");
  }
  for (size_t i = 0; i < sc->nwork; i++) {
    free(sc->work[i].path);
    free(sc->work[i].text);
  }
  free(sc->work);
  free(sc->seen);
  free_list(sc->dirs, sc->ndirs);
  free_list(sc->quote_dirs, sc->nquote);
  free_list(sc->pre, sc->npre);
  free(sc);
  return rc;
}
