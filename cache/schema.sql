-- tokitai-jit cache schema, version 4 (PRAGMA user_version = 4), in a file
-- marked PRAGMA application_id = 0x746A6974 ("tjit"), which the library
-- sets in the same transaction.  Embedded into the library at build time;
-- see cache/README.md.
CREATE TABLE IF NOT EXISTS code_objects (
  key        TEXT PRIMARY KEY,   -- XXH3-128 of the canonical inputs, 32 hex digits
  kernel     TEXT NOT NULL,      -- entry name
  arch       TEXT NOT NULL,      -- gfx90a:xnack-, sm_90, ...
  platform   TEXT NOT NULL,      -- amd | nvidia
  compiler   TEXT NOT NULL,      -- compiler fingerprint
  options    TEXT NOT NULL,      -- normalised caller options
  code       BLOB NOT NULL,      -- AMD GPU ELF or NVIDIA cubin
  code_hash  TEXT NOT NULL,      -- XXH3-128 of code, checked on every load
  code_size  INTEGER NOT NULL,
  compile_ms REAL NOT NULL,
  created    INTEGER NOT NULL,   -- unix seconds
  last_used  INTEGER NOT NULL,   -- unix seconds
  hits       INTEGER NOT NULL DEFAULT 0,
  entries    TEXT NOT NULL DEFAULT '', -- a module's entries (version 2)
  origin     TEXT NOT NULL DEFAULT 'compiled' -- where it came from (version 4)
);
-- origin: 'compiled' on the machine that stored it, copied from a read-only
-- 'system' cache or the 'remote' tier on a hit there, or copied in by
-- tokitai-jit --merge ('merged').  Nothing follows a column's comment on
-- its line, so that SQLite can still edit the table's SQL (DROP COLUMN).
CREATE INDEX IF NOT EXISTS code_objects_last_used ON code_objects(last_used);
CREATE TABLE IF NOT EXISTS counters (
  name  TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
INSERT OR IGNORE INTO counters(name, value) VALUES ('misses', 0);
-- What each entry of a row's code asks of the GPU, read from the code object
-- when the row is stored (version 3): one row per entry, in the order of
-- code_objects.entries (one for an embedded kernel).  NULL: the code object
-- does not say.
CREATE TABLE IF NOT EXISTS kernel_resources (
  key          TEXT NOT NULL,    -- the code_objects row
  entry        TEXT NOT NULL,    -- as the caller wrote it; an embedded kernel's name
  lowered      TEXT NOT NULL,    -- its name in the code object
  regs         INTEGER,          -- AMD: VGPRs; NVIDIA: registers per thread
  sgprs        INTEGER,          -- AMD only
  agprs        INTEGER,          -- AMD gfx908, gfx90a, gfx94x
  spills       INTEGER,          -- AMD: VGPRs + SGPRs spilled
  shared_bytes INTEGER,          -- static LDS / shared memory per block
  local_bytes  INTEGER,          -- scratch / local memory per thread
  max_threads  INTEGER,
  wave_size    INTEGER,
  PRIMARY KEY (key, entry)
);
-- A row's resources go with it, whichever statement deletes it.
CREATE TRIGGER IF NOT EXISTS code_objects_resources AFTER DELETE ON code_objects
BEGIN
  DELETE FROM kernel_resources WHERE key = old.key;
END;
-- Tuning decisions (version 4): which configuration of an embedded kernel
-- family ran fastest for a shape class, keyed like code (op, arch, platform,
-- compiler fingerprint, shape class), so that another compiler or arch
-- never uses an old decision; with what was measured, so that
-- `tokitai-jit --list-tuning` can say why.  A config this library does not
-- know (a newer or older release wrote it) is ignored, not deleted.
CREATE TABLE IF NOT EXISTS tuning (
  op          TEXT NOT NULL,     -- gemm_f16
  arch        TEXT NOT NULL,     -- the runtime's arch: sm_90
  platform    TEXT NOT NULL,     -- amd | nvidia
  compiler    TEXT NOT NULL,     -- compiler fingerprint, as code_objects
  shape_class TEXT NOT NULL,     -- src/ops/gemm_tune.c defines it
  config      TEXT NOT NULL,     -- the winner: sm90a_128x128_split4
  m           INTEGER NOT NULL,  -- the shape that was timed
  n           INTEGER NOT NULL,
  k           INTEGER NOT NULL,
  device      TEXT NOT NULL,     -- the GPU it was timed on: NVIDIA H200
  runs        INTEGER NOT NULL,  -- timed runs per candidate
  measured    TEXT NOT NULL,     -- "config<TAB>median ms<TAB>runs" lines, one per candidate
  origin      TEXT NOT NULL,     -- first use | tune
  created     INTEGER NOT NULL,  -- unix seconds
  PRIMARY KEY (op, arch, platform, compiler, shape_class)
);
