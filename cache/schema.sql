-- tokitai-jit cache schema, version 2 (PRAGMA user_version = 2).
-- Embedded into the library at build time; see cache/README.md.
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
  entries    TEXT NOT NULL DEFAULT ''  -- "expression<TAB>lowered" lines (modules)
);
CREATE INDEX IF NOT EXISTS code_objects_last_used ON code_objects(last_used);
CREATE TABLE IF NOT EXISTS counters (
  name  TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
INSERT OR IGNORE INTO counters(name, value) VALUES ('misses', 0);
