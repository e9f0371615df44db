/*
 * check_remote_cluster.c: the remote tier on a Redis Cluster of three
 * redis-server processes that the suite starts on free loopback ports
 * (cluster-enabled, each in its own directory, the slots split in three
 * by CLUSTER ADDSLOTSRANGE and the nodes joined by CLUSTER MEET), and on
 * small socket servers of its own that answer as no node should.  It is
 * skipped (77) when redis-server is not installed, cannot run a cluster,
 * or the library was built without hiredis.
 */
#include "testutil.h"

#ifdef TJ_HAVE_HIREDIS
#include "testremote.h"

#define NODES 3

/* ------------------------------------------------------- the cluster */

/* A free loopback port, or 0: one bound and given back. */
static int port_free(int port)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  socklen_t n = sizeof a;
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)port);
  int got = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                    getsockname(fd, (struct sockaddr *)&a, &n) == 0
                ? ntohs(a.sin_port)
                : 0;
  if (fd >= 0)
    close(fd);
  return got;
}

/* A port for a cluster node: free, and its cluster bus port (10000
 * above it, where redis-server puts it) free too.  No assertion: main
 * asks too, outside a test. */
static int node_port(void)
{
  for (int i = 0; i < 1000; i++) {
    int p = port_free(0);
    if (p >= 1024 && p <= 65535 - 10000 && port_free(p + 10000))
      return p;
  }
  return 0;
}

typedef struct cluster {
  char *dir;
  redis_server node[NODES];
  char id[NODES][48];
  char *spec; /* every node a seed */
} cluster;

static const char *const cluster_args[] = {
    "--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
    "--cluster-require-full-coverage", "no", NULL};

static void node_start(cluster *cl, int i)
{
  char name[16];
  snprintf(name, sizeof name, "n%d", i);
  char *d = test_path(cl->dir, name);
  mkdir(d, 0700);
  int at = node_port();
  ck_assert_int_ne(at, 0);
  start_server_with(&cl->node[i], d, at, cluster_args);
  free(d);
}

/* The text of an admin command's answer, in buf. */
static void ask_text(const redis_server *s, char *buf, size_t len,
                     const char *fmt, const char *a)
{
  redisReply *r = ask(s, fmt, a);
  ck_assert_msg(r->type == REDIS_REPLY_STRING ||
                    r->type == REDIS_REPLY_STATUS,
                "%s: %s", fmt, r->type == REDIS_REPLY_ERROR ? r->str : "?");
  snprintf(buf, len, "%s", r->str);
  freeReplyObject(r);
}

static void ask_ok(const redis_server *s, const char *fmt, ...)
{
  redisContext *c = admin(s->port);
  ck_assert_ptr_nonnull(c);
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(c, fmt, ap);
  va_end(ap);
  redisFree(c);
  ck_assert_ptr_nonnull(r);
  ck_assert_msg(r->type == REDIS_REPLY_STATUS, "%s: %s", fmt,
                r->type == REDIS_REPLY_ERROR ? r->str : "not OK");
  freeReplyObject(r);
}

/* Every node says the cluster is whole: state ok, three nodes, and a
 * slot map of three ranges. */
static int cluster_whole(const cluster *cl)
{
  for (int i = 0; i < NODES; i++) {
    char info[4096];
    ask_text(&cl->node[i], info, sizeof info, "CLUSTER INFO", NULL);
    redisReply *r = ask(&cl->node[i], "CLUSTER SLOTS");
    int ranges = r->type == REDIS_REPLY_ARRAY ? (int)r->elements : 0;
    freeReplyObject(r);
    if (!strstr(info, "cluster_state:ok") ||
        !strstr(info, "cluster_known_nodes:3") || ranges != NODES)
      return 0;
  }
  return 1;
}

/* Three nodes, slots 0-5460, 5461-10922 and 10923-16383 in order. */
static void cluster_start(cluster *cl)
{
  memset(cl, 0, sizeof *cl);
  cl->dir = test_tmpdir();
  static const int lo[NODES] = {0, 5461, 10923}, hi[NODES] = {5460, 10922,
                                                             16383};
  for (int i = 0; i < NODES; i++) {
    node_start(cl, i);
    ask_text(&cl->node[i], cl->id[i], sizeof cl->id[i], "CLUSTER MYID",
             NULL);
    ask_ok(&cl->node[i], "CLUSTER ADDSLOTSRANGE %d %d", lo[i], hi[i]);
  }
  for (int i = 1; i < NODES; i++)
    ask_ok(&cl->node[0], "CLUSTER MEET 127.0.0.1 %d", cl->node[i].port);
  int whole = 0;
  for (int t = 0; t < 1500 && !(whole = cluster_whole(cl)); t++)
    sleep_ms(20);
  ck_assert_msg(whole, "the cluster did not come together");
  cl->spec = calloc(1, 64 * NODES);
  for (int i = 0; i < NODES; i++)
    sprintf(cl->spec + strlen(cl->spec), "%sredis+cluster://127.0.0.1:%d",
            i ? "," : "", cl->node[i].port);
}

static void cluster_stop(cluster *cl)
{
  for (int i = 0; i < NODES; i++)
    stop_server(&cl->node[i]);
  free(cl->spec);
  free(cl->dir);
}

/* The node that serves slot, by the test's own slot ranges. */
static int node_of_slot(unsigned slot)
{
  return slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2;
}

/* The keys on node i matching pat. */
static long long keys_on(const cluster *cl, int i, const char *pat)
{
  return keys_matching(&cl->node[i], 1, pat);
}

/* A made-up row for key: what tj__remote_put publishes. */
static const unsigned char fake_code[] = "\177ELF a code object, hashed";
static tj__cache_row row_for(const char *key)
{
  tj__cache_row row = {key, "add_i32", TEST_ARCH, TJ__PLATFORM,
                       "compiler 1", "-O3", fake_code, sizeof fake_code,
                       1.5, "", NULL};
  return row;
}

/* A remote on spec, the suite's settings. */
static tj__remote *remote_on(const char *spec)
{
  tj__remote_settings set;
  char why[256], msg[512];
  tj__remote_settings_env(&set, why, sizeof why);
  tj__remote *r = NULL;
  ck_assert_msg(tj__remote_open(spec, &set, &r, msg, sizeof msg) == TJ_OK,
                "%s", msg);
  return r;
}

/* The value of key through r: TJ_OK, TJ_ENOENT or TJ_EIO. */
static int fetch(tj__remote *r, const char *key)
{
  tj__cache_row want = row_for(key);
  tj__remote_value v;
  int rejected;
  int rc = tj__remote_get(r, &want, &v, &rejected);
  ck_assert_int_eq(rejected, 0);
  if (rc == TJ_OK) {
    ck_assert_mem_eq(v.code, fake_code, sizeof fake_code);
    tj__found_free(&v);
  }
  return rc;
}

/* A key (32 hex digits) whose slot the node i serves, the n-th such. */
static void key_on_node(int i, int n, char key[TJ__KEY_HEX])
{
  for (unsigned k = 0;; k++) {
    snprintf(key, TJ__KEY_HEX, "%032x", k);
    if (node_of_slot(tj__remote_redis_slot(key, strlen(key))) == i &&
        n-- == 0)
      return;
  }
}

static uint64_t redirects_of(const tj__remote *r)
{
  tj__remote_counters n;
  tj__remote_get_counters(r, &n);
  return n.redirects;
}

/* ------------------------------------------------------- slots, specs */

/* The slot of a name is CRC16-XMODEM mod 16384 of its hash tag, or of
 * the whole name: the check value of CRC16-XMODEM and the examples of
 * the Redis Cluster specification. */
START_TEST(hash_slots_are_those_of_the_specification)
{
  ck_assert_uint_eq(tj__remote_redis_slot("123456789", 9), 0x31C3 % 16384);
  ck_assert_uint_eq(tj__remote_redis_slot("foo", 3), 12182);
  ck_assert_uint_eq(tj__remote_redis_slot("bar", 3), 5061);
  ck_assert_uint_eq(tj__remote_redis_slot("", 0), 0);
  const char *f = "{user1000}.following", *g = "{user1000}.followers";
  ck_assert_uint_eq(tj__remote_redis_slot(f, strlen(f)),
                    tj__remote_redis_slot(g, strlen(g)));
  ck_assert_uint_eq(tj__remote_redis_slot(f, strlen(f)),
                    tj__remote_redis_slot("user1000", 8));
  /* Only the first tag counts; an empty one hashes the whole name. */
  ck_assert_uint_eq(tj__remote_redis_slot("foo{bar}{zap}", 13),
                    tj__remote_redis_slot("bar", 3));
  ck_assert_uint_eq(tj__remote_redis_slot("foo{{bar}}zap", 13),
                    tj__remote_redis_slot("{bar", 4));
  ck_assert_uint_ne(tj__remote_redis_slot("foo{}{bar}", 10),
                    tj__remote_redis_slot("bar", 3));
  ck_assert_uint_eq(tj__remote_redis_slot("foo{}{bar}", 10),
                    tj__remote_redis_slot("foo{}{bar}x", 10));
  ck_assert_uint_eq(tj__remote_redis_slot("a{b", 3),
                    tj__remote_redis_slot("a{b", 3));
}
END_TEST

START_TEST(cluster_specs_that_do_not_parse_are_refused)
{
  static const char *const bad[] = {
      "redis+cluster://127.0.0.1:7000,redis://127.0.0.1:7001",
      "redis://127.0.0.1:7001,redis+cluster://127.0.0.1:7000",
      "redis+cluster://127.0.0.1:7000/2",
      "redis+cluster://127.0.0.1:7000?db=1",
      "redis+cluster://127.0.0.1:7000?prefix=a,"
      "redis+cluster://127.0.0.1:7001?prefix=b",
      "redis+cluster://:secret@127.0.0.1:7000,"
      "redis+cluster://127.0.0.1:7001",
      "redis+cluster://127.0.0.1",
      "redis+cluster://",
      "redis+cluster:/127.0.0.1:7000",
      "redis+cluster://127.0.0.1:7000,unix:///tmp/redis.sock",
  };
  tj__remote_settings set;
  char why[256], msg[512];
  tj__remote_settings_env(&set, why, sizeof why);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    tj__remote *r = NULL;
    ck_assert_msg(tj__remote_open(bad[i], &set, &r, msg, sizeof msg) ==
                      TJ_EINVAL, "%s", bad[i]);
    ck_assert_ptr_null(r);
    ck_assert_msg(!strstr(msg, "secret"), "%s", msg);
  }
  tj__remote *r = NULL;
  ck_assert_int_eq(tj__remote_open("redis+cluster://u:secret@10.0.0.1:7000"
                                   "?prefix=p,"
                                   "redis+cluster://u:secret@[::1]:7001"
                                   "?prefix=p&readonly",
                                   &set, &r, msg, sizeof msg), TJ_OK);
  ck_assert_int_eq(tj__remote_readonly(r), 1);
  ck_assert_int_eq(tj__remote_server_count(r), 2); /* the seeds, unmapped */
  tj__remote_close(r);
}
END_TEST

/* ------------------------------------------------------- a live cluster */

/* A value published through one seed is found through another, and its
 * key is where CLUSTER KEYSLOT puts it, tagged with the key: the value
 * and the lease of a key share one slot. */
START_TEST(values_published_through_one_seed_are_found_through_another)
{
  cluster cl;
  cluster_start(&cl);
  char spec0[64], spec2[64];
  snprintf(spec0, sizeof spec0, "redis+cluster://127.0.0.1:%d",
           cl.node[0].port);
  snprintf(spec2, sizeof spec2, "redis+cluster://127.0.0.1:%d",
           cl.node[2].port);
  tj__remote *a = remote_on(spec0), *b = remote_on(spec2);
  char key[TJ__KEY_HEX];
  key_on_node(1, 0, key); /* on neither seed */
  ck_assert_int_eq(fetch(b, key), TJ_ENOENT);
  tj__cache_row row = row_for(key);
  ck_assert_int_eq(tj__remote_put(a, &row), TJ_OK);
  ck_assert_int_eq(fetch(b, key), TJ_OK);
  ck_assert_int_eq(tj__remote_server_count(b), NODES);
  ck_assert_int_eq(tj__remote_server_of(a, key), tj__remote_server_of(b, key));
  char name[128];
  snprintf(name, sizeof name, "tokitai-jit:v1:code:{%s}", key);
  ck_assert_int_eq(keys_on(&cl, 1, name), 1);
  redisReply *r = ask(&cl.node[0], "CLUSTER KEYSLOT %s", name);
  ck_assert_int_eq(r->integer, tj__remote_redis_slot(key, strlen(key)));
  freeReplyObject(r);
  /* The slot of names with and without tags, as the server says. */
  static const char *const names[] = {
      "foo", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap",
      "foo{bar}{zap}", "tokitai-jit:v1:lease:{0123456789abcdef}", "{", "}{x}"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    r = ask(&cl.node[1], "CLUSTER KEYSLOT %s", names[i]);
    ck_assert_msg(r->integer == tj__remote_redis_slot(names[i],
                                                      strlen(names[i])),
                  "%s", names[i]);
    freeReplyObject(r);
  }
  /* A lease is taken in the key's slot; no redirection was needed. */
  tj__remote_lease l;
  ck_assert_int_eq(tj__remote_lease_begin(a, key, 1000, &l), 0);
  snprintf(name, sizeof name, "tokitai-jit:v1:lease:{%s}", key);
  ck_assert_int_eq(keys_on(&cl, 1, name), 1);
  tj__remote_lease_end(a, &l);
  ck_assert_int_eq(keys_on(&cl, 1, name), 0);
  ck_assert_uint_eq(redirects_of(a) + redirects_of(b), 0);
  ck_assert_int_eq(tj__remote_off(a) + tj__remote_off(b), 0);
  tj__remote_close(a);
  tj__remote_close(b);
  cluster_stop(&cl);
}
END_TEST

START_TEST(keys_land_on_all_three_nodes)
{
  enum { KEYS = 48 };
  cluster cl;
  cluster_start(&cl);
  tj__remote *r = remote_on(cl.spec);
  for (int k = 0; k < KEYS; k++) {
    char key[TJ__KEY_HEX];
    snprintf(key, sizeof key, "%016llx%016llx", (unsigned long long)k * 7919,
             (unsigned long long)XXH3_64bits(&k, sizeof k));
    tj__cache_row row = row_for(key);
    ck_assert_int_eq(tj__remote_put(r, &row), TJ_OK);
  }
  long long total = 0;
  for (int i = 0; i < NODES; i++) {
    long long n = keys_on(&cl, i, "tokitai-jit:v1:code:*");
    ck_assert_msg(n > 0, "node %d holds no key", i);
    total += n;
  }
  ck_assert_int_eq(total, KEYS);
  ck_assert_uint_eq(redirects_of(r), 0);
  tj__remote_close(r);
  cluster_stop(&cl);
}
END_TEST

/* Move slot from node src to node dst with its keys; with finish unset,
 * leave it half-way: migrating on src, importing on dst, the keys on
 * dst already. */
static void migrate_slot(cluster *cl, unsigned slot, int src, int dst,
                         const char *key_name, int finish)
{
  ask_ok(&cl->node[dst], "CLUSTER SETSLOT %u IMPORTING %s", slot,
         cl->id[src]);
  ask_ok(&cl->node[src], "CLUSTER SETSLOT %u MIGRATING %s", slot,
         cl->id[dst]);
  redisContext *c = admin(cl->node[src].port);
  redisReply *r = redisCommand(c, "MIGRATE 127.0.0.1 %d %s 0 5000",
                               cl->node[dst].port, key_name);
  ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "MIGRATE: %s",
                r && r->type == REDIS_REPLY_ERROR ? r->str : "?");
  freeReplyObject(r);
  redisFree(c);
  if (!finish)
    return;
  ask_ok(&cl->node[dst], "CLUSTER SETSLOT %u NODE %s", slot, cl->id[dst]);
  ask_ok(&cl->node[src], "CLUSTER SETSLOT %u NODE %s", slot, cl->id[dst]);
}

/* A map made before a slot moved: the old node answers MOVED, the
 * command goes to the new one, and the map is right from then on. */
START_TEST(a_moved_slot_is_followed)
{
  cluster cl;
  cluster_start(&cl);
  tj__remote *r = remote_on(cl.spec);
  char key[TJ__KEY_HEX], name[128];
  key_on_node(0, 3, key);
  tj__cache_row row = row_for(key);
  ck_assert_int_eq(tj__remote_put(r, &row), TJ_OK);
  ck_assert_int_eq(tj__remote_server_of(r, key), 0);
  unsigned slot = tj__remote_redis_slot(key, strlen(key));
  snprintf(name, sizeof name, "tokitai-jit:v1:code:{%s}", key);
  migrate_slot(&cl, slot, 0, 2, name, 1);
  ck_assert_int_eq(fetch(r, key), TJ_OK);
  ck_assert_uint_eq(redirects_of(r), 1);
  ck_assert_int_eq(tj__remote_server_of(r, key), 2);
  ck_assert_int_eq(fetch(r, key), TJ_OK);
  ck_assert_uint_eq(redirects_of(r), 1);
  ck_assert_int_eq(keys_on(&cl, 2, name), 1);
  ck_assert_int_eq(tj__remote_off(r), 0);
  tj__remote_close(r);
  cluster_stop(&cl);
}
END_TEST

/* A runtime whose slot map is older than a slot's move: tj_stats counts
 * the MOVED it followed, and so do the cache's counters that --stats
 * prints once the runtime is closed. */
START_TEST(a_runtime_counts_the_redirections_it_followed)
{
  cluster cl;
  cluster_start(&cl);
  char *a = test_path(cl.dir, "a.db"), *b = test_path(cl.dir, "b.db");
  tj_runtime *ra = open_remote(a, cl.spec), *rb = open_remote(b, cl.spec);
  ck_assert_ptr_nonnull(ra);
  ck_assert_ptr_nonnull(rb);
  tj_kernel *k;
  tj_kernel_info info;
  tj_stats st;
  ck_assert_int_eq(tj_kernel_get(rb, "gelu_fwd_f16", &k), TJ_OK); /* map */
  ck_assert_int_eq(tj_kernel_get(ra, "add_i32", &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_get_info(k, &info), TJ_OK);
  unsigned slot = tj__remote_redis_slot(info.key, strlen(info.key));
  int from = slot < 5461 ? 0 : slot < 10923 ? 1 : 2;
  char name[128];
  snprintf(name, sizeof name, "tokitai-jit:v1:code:{%s}", info.key);
  migrate_slot(&cl, slot, from, (from + 1) % NODES, name, 1);
  ck_assert_int_eq(tj_kernel_get(rb, "add_i32", &k), TJ_OK);
  ck_assert_int_eq(tj_runtime_get_stats(rb, &st), TJ_OK);
  ck_assert_uint_eq(st.remote_hits, 1);
  ck_assert_uint_eq(st.remote_redirects, 1);
  ck_assert_int_eq(tj_runtime_get_stats(ra, &st), TJ_OK);
  ck_assert_uint_eq(st.remote_redirects, 0);
  tj_runtime_close(rb);
  tj_runtime_close(ra);
  tj_cache *c = NULL;
  tj_cache_stats cs;
  ck_assert_int_eq(tj_cache_open(&c, b, TJ_CACHE_READONLY), TJ_OK);
  ck_assert_int_eq(tj_cache_get_stats(c, &cs), TJ_OK);
  ck_assert_uint_eq(cs.remote_redirects, 1);
  tj_cache_close(c);
  free(a);
  free(b);
  cluster_stop(&cl);
}
END_TEST

/* A slot half-way through a migration: a key already moved is asked for
 * on the old node, which answers ASK; ASKING and the command go to the
 * new node, and the map stays as it was (each later command is asked
 * again). */
START_TEST(an_ask_during_a_migration_is_followed)
{
  cluster cl;
  cluster_start(&cl);
  tj__remote *r = remote_on(cl.spec);
  char key[TJ__KEY_HEX], name[128];
  key_on_node(1, 5, key);
  tj__cache_row row = row_for(key);
  ck_assert_int_eq(tj__remote_put(r, &row), TJ_OK);
  unsigned slot = tj__remote_redis_slot(key, strlen(key));
  snprintf(name, sizeof name, "tokitai-jit:v1:code:{%s}", key);
  migrate_slot(&cl, slot, 1, 0, name, 0);
  ck_assert_int_eq(keys_on(&cl, 0, name), 1);
  ck_assert_int_eq(fetch(r, key), TJ_OK);
  ck_assert_uint_eq(redirects_of(r), 1);
  ck_assert_int_eq(tj__remote_server_of(r, key), 1);
  ck_assert_int_eq(fetch(r, key), TJ_OK);
  ck_assert_uint_eq(redirects_of(r), 2);
  /* A lease during the migration: taken on the importing node. */
  tj__remote_lease l;
  ck_assert_int_eq(tj__remote_lease_begin(r, key, 1000, &l), 0);
  tj__remote_lease_end(r, &l);
  ck_assert_int_eq(tj__remote_off(r), 0);
  tj__remote_close(r);
  cluster_stop(&cl);
}
END_TEST

/* N processes, each its own cache, warming add_i32 and a kernel of
 * their own through the cluster: each compiled once in all. */
START_TEST(a_herd_compiles_each_key_once_through_a_cluster)
{
  enum { N = 16 };
  cluster cl;
  cluster_start(&cl);
  herd h;
  herd_start(&h, N, cl.dir, cl.spec, 0, ADD_AND_USER);
  herd_go(&h);
  herd_wait(&h);
  long long values = 0;
  for (int i = 0; i < NODES; i++)
    values += keys_on(&cl, i, "tokitai-jit:v1:code:*");
  printf("remote cluster: %d processes, own caches, %d nodes: %d "
         "succeeded, %llu compiles, %llu remote hits; %lld values\n", N,
         NODES, h.ok, (unsigned long long)h.compiles,
         (unsigned long long)h.remote_hits, values);
  ck_assert_int_eq(h.ok, N);
  ck_assert_uint_eq(h.compiles, 2);
  ck_assert_uint_eq(h.remote_hits, 2 * (N - 1));
  ck_assert_uint_eq(h.errors + h.timeouts + h.drops, 0);
  ck_assert_int_eq(values, 2);
  for (int i = 0; i < NODES; i++)
    ck_assert_int_eq(keys_on(&cl, i, "tokitai-jit:v1:lease:*"), 0);
  for (int i = 0; i < N; i++)
    ck_assert_msg(!h.got[i].msg[0], "process %d: %s", i, h.got[i].msg);
  cluster_stop(&cl);
}
END_TEST

/* The node that holds the lease is killed while its holder compiles:
 * every process succeeds, each turns the tier off at most once. */
START_TEST(a_node_killed_mid_run_turns_the_tier_off_and_fails_no_call)
{
  cluster cl;
  cluster_start(&cl);
  herd h;
  herd_start(&h, PROCS, cl.dir, cl.spec, 0, ADD);
  herd_go(&h);
  int holder = -1;
  for (int t = 0; t < 3000 && holder < 0; t++) {
    for (int i = 0; i < NODES && holder < 0; i++)
      if (keys_on(&cl, i, "tokitai-jit:v1:lease:*") > 0)
        holder = i;
    if (holder < 0)
      sleep_ms(2);
  }
  int seen = holder >= 0;
  if (!seen)
    holder = 0;
  stop_server(&cl.node[holder]);
  herd_wait(&h);
  printf("remote cluster: node %d killed %s: %d of %d succeeded, %llu "
         "compiles, %llu errors, %llu timeouts\n", holder,
         seen ? "while a lease was held" : "(no lease seen)", h.ok,
         PROCS, (unsigned long long)h.compiles,
         (unsigned long long)h.errors, (unsigned long long)h.timeouts);
  ck_assert_int_eq(h.ok, PROCS);
  ck_assert_uint_ge(h.compiles, 1);
  if (seen) /* the holder, at least, had the node fail under it */
    ck_assert_uint_ge(h.errors + h.timeouts, 1);
  for (int i = 0; i < PROCS; i++)
    ck_assert_uint_le(h.got[i].st.remote_errors +
                          h.got[i].st.remote_timeouts, 1);
  /* A remote that maps the rest of the cluster: a key on a live node is
   * served, the dead node's keys turn the tier off. */
  tj__remote *r = remote_on(cl.spec);
  char key[TJ__KEY_HEX];
  key_on_node((holder + 1) % NODES, 0, key);
  ck_assert_int_eq(fetch(r, key), TJ_ENOENT);
  key_on_node(holder, 0, key);
  ck_assert_int_eq(fetch(r, key), TJ_EIO);
  ck_assert_int_eq(tj__remote_off(r), 1);
  char said[800];
  ck_assert_int_eq(tj__remote_take_warning(r, said, sizeof said), 1);
  ck_assert_ptr_nonnull(strstr(said, "remote tier off"));
  tj__remote_close(r);
  cluster_stop(&cl);
}
END_TEST

/* The node that holds the values of kernel set what, warmed by one
 * process with a cache of its own under dir/name: its index, or -1 when
 * the new values are not all on one node. */
static int probe_node(const cluster *cl, const char *name, int what,
                      long long before[NODES])
{
  char *sub = test_path(cl->dir, name);
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  herd h;
  herd_start(&h, 1, sub, cl->spec, 0, what);
  herd_go(&h);
  herd_wait(&h);
  ck_assert_int_eq(h.ok, 1);
  free(sub);
  int at = -1;
  for (int i = 0; i < NODES; i++) {
    long long n = keys_on(cl, i, "tokitai-jit:v1:code:*");
    if (n > before[i])
      at = at < 0 ? i : -2;
    before[i] = n;
  }
  return at < 0 ? -1 : at;
}

/* A node is dead before the herd starts, and it serves the key that
 * each process warms first: that key is compiled by every process, but
 * the breaker is the dead node's only, so the key served by a live node
 * is still compiled once in all. */
START_TEST(a_dead_node_leaves_the_other_nodes_keys_shared)
{
  enum { N = 8 };
  setenv("TOKITAI_JIT_REMOTE_LEASE_MS", "2000", 1);
  cluster cl;
  cluster_start(&cl);
  long long before[NODES] = {0};
  int dead = probe_node(&cl, "add", ADD, before), user = dead;
  ck_assert_int_ge(dead, 0);
  char src[160], name[32];
  for (int v = 0; v < 16 && user == dead; v++) { /* a user kernel whose
                                                    key a live node serves */
    snprintf(src, sizeof src, "extern \"C\" __global__ void remote_k(int "
             "*p) { p[threadIdx.x] = %d; }", v);
    snprintf(name, sizeof name, "user%d", v);
    herd_user_source = src;
    user = probe_node(&cl, name, ADD_AND_USER, before);
    ck_assert_int_ge(user, 0);
  }
  ck_assert_int_ne(user, dead);
  for (int i = 0; i < NODES; i++)
    freeReplyObject(ask(&cl.node[i], "FLUSHALL"));
  stop_server(&cl.node[dead]);
  herd h;
  herd_start(&h, N, cl.dir, cl.spec, 0, ADD_AND_USER);
  herd_go(&h);
  herd_wait(&h);
  printf("remote cluster: node %d dead, the user kernel on node %d: %d of "
         "%d succeeded, %llu compiles, %llu remote hits, %llu errors\n",
         dead, user, h.ok, N, (unsigned long long)h.compiles,
         (unsigned long long)h.remote_hits, (unsigned long long)h.errors);
  ck_assert_int_eq(h.ok, N);
  /* add_i32 by each process; the live node's key once, N-1 hits */
  ck_assert_uint_eq(h.compiles, N + 1);
  ck_assert_uint_eq(h.remote_hits, N - 1);
  ck_assert_int_eq(keys_on(&cl, user, "tokitai-jit:v1:code:*"), 1);
  ck_assert_int_eq(keys_on(&cl, user, "tokitai-jit:v1:lease:*"), 0);
  for (int i = 0; i < N; i++) { /* one opening each: the dead node's */
    ck_assert_uint_eq(h.got[i].st.remote_breaker_openings, 1);
    ck_assert_uint_le(h.got[i].st.remote_errors +
                          h.got[i].st.remote_timeouts, 1);
  }
  unsetenv("TOKITAI_JIT_REMOTE_LEASE_MS");
  herd_user_source = user_source;
  cluster_stop(&cl);
}
END_TEST

/* One remote, a node dead: the dead node's keys answer at once as the
 * tier off, the others' keys are still read and written. */
START_TEST(a_dead_node_turns_off_its_keys_only)
{
  cluster cl;
  cluster_start(&cl);
  tj__remote *r = remote_on(cl.spec), *other = remote_on(cl.spec);
  char live[TJ__KEY_HEX], gone[TJ__KEY_HEX];
  key_on_node(1, 0, live);
  key_on_node(0, 0, gone);
  ck_assert_int_eq(fetch(r, live), TJ_ENOENT); /* the map is learnt */
  stop_server(&cl.node[0]);
  ck_assert_int_eq(fetch(r, gone), TJ_EIO);
  ck_assert_int_eq(tj__remote_off(r), 1);
  ck_assert_int_eq(fetch(r, gone), TJ_EIO); /* at once: off */
  tj__cache_row row = row_for(live);
  ck_assert_int_eq(tj__remote_put(r, &row), TJ_OK);
  ck_assert_int_eq(fetch(r, live), TJ_OK);
  ck_assert_int_eq(fetch(other, live), TJ_OK);
  tj__remote_counters n;
  tj__remote_get_counters(r, &n);
  ck_assert_uint_eq(n.openings, 1);
  ck_assert_uint_eq(n.errors + n.timeouts, 1);
  ck_assert_uint_eq(n.hits, 1);
  char said[800];
  ck_assert_int_eq(tj__remote_take_warning(r, said, sizeof said), 1);
  ck_assert_ptr_nonnull(strstr(said, "for one server's keys"));
  tj__remote_close(r);
  tj__remote_close(other);
  cluster_stop(&cl);
}
END_TEST

/* ------------------------------------------------------- odd nodes */

enum { LOOP, HUGE_MAP, BAD_MAP, BAD_REDIRECT, ENDLESS_LINE };

/* A node of the test's own on a loopback port (returned), until killed:
 * it answers CLUSTER SLOTS with how's map (LOOP: every slot its own) and
 * every other command with how's redirection (LOOP: MOVED to itself). */
static int odd_node(int how, pid_t *pid)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  socklen_t n = sizeof a;
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(listen(fd, 16), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &n), 0);
  int port = ntohs(a.sin_port);
  char map[1024], redirect[128];
  snprintf(map, sizeof map, how == HUGE_MAP ? "*100000000\r\n"
                            : how == BAD_MAP ? "*1\r\n*2\r\n:0\r\n:16383\r\n"
                                             : "*1\r\n*3\r\n:0\r\n:16383\r\n"
                                               "*2\r\n$9\r\n127.0.0.1\r\n:%d"
                                               "\r\n", port);
  if (how == ENDLESS_LINE) { /* an error line longer than any answer's */
    memset(map, 'x', sizeof map - 1);
    map[0] = '-', map[sizeof map - 1] = '\0';
  }
  snprintf(redirect, sizeof redirect, how == BAD_REDIRECT
                                          ? "-MOVED 99999 127.0.0.1:%d\r\n"
                                          : "-MOVED 1 127.0.0.1:%d\r\n",
           port);
  pid_t test = getpid();
  *pid = fork();
  ck_assert_int_ge(*pid, 0);
  if (*pid == 0) {
    die_with(test);
    for (;;) {
      int c = accept(fd, NULL, NULL);
      char buf[4096];
      ssize_t k;
      while (c >= 0 && (k = recv(c, buf, sizeof buf - 1, 0)) > 0) {
        buf[k] = '\0';
        const char *say = strstr(buf, "SLOTS") ? map : redirect;
        (void)!send(c, say, strlen(say), MSG_NOSIGNAL);
      }
      if (c >= 0)
        close(c);
    }
  }
  close(fd);
  return port;
}

/* A node that redirects a key to itself for ever, one whose slot map
 * claims 10^8 ranges, one whose map does not parse, one whose MOVED
 * names no slot, one whose answer is a line that does not end: each is
 * one fault that turns the tier off, said once, never a hang. */
START_TEST(odd_nodes_are_one_fault_each)
{
  static const char *const said[] = {"redirected more than",
                                     "more than the command returns",
                                     "slot map", "it answered 'MOVED",
                                     "a reply header that does not end"};
  for (int how = LOOP; how <= ENDLESS_LINE; how++) {
    pid_t pid;
    char spec[64];
    snprintf(spec, sizeof spec, "redis+cluster://127.0.0.1:%d",
             odd_node(how, &pid));
    tj__remote *r = remote_on(spec);
    char key[TJ__KEY_HEX];
    key_on_node(0, 0, key);
    ck_assert_int_eq(fetch(r, key), TJ_EIO);
    ck_assert_int_eq(tj__remote_off(r), 1);
    tj__remote_counters n;
    tj__remote_get_counters(r, &n);
    ck_assert_uint_eq(n.errors, 1);
    ck_assert_uint_eq(n.timeouts, 0);
    ck_assert_uint_eq(n.redirects, how == LOOP ? 6 : 0);
    char why[800];
    ck_assert_int_eq(tj__remote_take_warning(r, why, sizeof why), 1);
    ck_assert_msg(strstr(why, said[how]), "%d: %s", how, why);
    tj__remote_close(r);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
}
END_TEST

/* A standalone server named as a cluster's seed: it refuses CLUSTER
 * SLOTS, and the tier goes off with its answer in the warning. */
START_TEST(a_standalone_server_as_a_seed_is_one_fault)
{
  char *dir = test_tmpdir();
  redis_server s;
  start_server(&s, dir);
  char spec[64];
  snprintf(spec, sizeof spec, "redis+cluster://127.0.0.1:%d", s.port);
  tj__remote *r = remote_on(spec);
  char key[TJ__KEY_HEX];
  key_on_node(0, 0, key);
  ck_assert_int_eq(fetch(r, key), TJ_EIO);
  tj__remote_counters n;
  tj__remote_get_counters(r, &n);
  ck_assert_uint_eq(n.errors, 1);
  char why[800];
  ck_assert_int_eq(tj__remote_take_warning(r, why, sizeof why), 1);
  ck_assert_msg(strstr(why, "cluster support disabled"), "%s", why);
  tj__remote_close(r);
  stop_server(&s);
  free(dir);
}
END_TEST

/* ------------------------------------------------------- main */

/* A redis-server on $PATH that runs as a cluster node and answers
 * CLUSTER INFO. */
static int cluster_supported(void)
{
  char *dir = test_tmpdir();
  char port[16];
  int at = node_port();
  snprintf(port, sizeof port, "%d", at);
  pid_t pid = fork();
  if (pid < 0)
    return 0;
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execlp("redis-server", "redis-server", "--port", port, "--bind",
           "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
           "--cluster-enabled", "yes", (char *)NULL);
    _exit(127);
  }
  int ok = 0;
  for (int i = 0; i < 500 && !ok; i++) {
    if (waitpid(pid, NULL, WNOHANG) == pid) {
      pid = 0;
      break;
    }
    redisContext *c = admin(at);
    redisReply *r = c ? redisCommand(c, "CLUSTER INFO") : NULL;
    ok = r && r->type == REDIS_REPLY_STRING;
    if (r)
      freeReplyObject(r);
    if (c)
      redisFree(c);
    if (!ok)
      sleep_ms(10);
  }
  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
  char *conf = test_path(dir, "nodes.conf");
  unlink(conf);
  free(conf);
  rmdir(dir);
  free(dir);
  return ok;
}

int main(void)
{
  if (!have_redis_server()) {
    printf("redis-server is not installed: skipping check_remote_cluster\n");
    return 77;
  }
  if (!cluster_supported()) {
    printf("redis-server does not run as a cluster node: skipping "
           "check_remote_cluster\n");
    return 77;
  }
  /* A fault turns the tier off for longer than a case runs. */
  setenv("TOKITAI_JIT_REMOTE_BACKOFF_MS", "600000", 1);
  Suite *s = suite_create("remote_cluster");
  TCase *tc = test_case(s, "slots", 30);
  tcase_add_test(tc, hash_slots_are_those_of_the_specification);
  tcase_add_test(tc, cluster_specs_that_do_not_parse_are_refused);
  tcase_add_test(tc, odd_nodes_are_one_fault_each);
  tcase_add_test(tc, a_standalone_server_as_a_seed_is_one_fault);
  tc = test_case(s, "cluster", 240);
  tcase_add_test(tc, values_published_through_one_seed_are_found_through_another);
  tcase_add_test(tc, keys_land_on_all_three_nodes);
  tcase_add_test(tc, a_moved_slot_is_followed);
  tcase_add_test(tc, a_runtime_counts_the_redirections_it_followed);
  tcase_add_test(tc, an_ask_during_a_migration_is_followed);
  tcase_add_test(tc, a_herd_compiles_each_key_once_through_a_cluster);
  tcase_add_test(tc, a_node_killed_mid_run_turns_the_tier_off_and_fails_no_call);
  tcase_add_test(tc, a_dead_node_turns_off_its_keys_only);
  tcase_add_test(tc, a_dead_node_leaves_the_other_nodes_keys_shared);
  return run_suite(s);
}

#else

int main(void)
{
  printf("built without hiredis: skipping check_remote_cluster\n");
  return 77;
}

#endif
