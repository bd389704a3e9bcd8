#!/usr/bin/env python3
"""Regenerate the seed corpus of fuzz_merge (maintainer tool, not run by
make): python3 tests/fuzz/make_merge_seeds.py build/attnlab

Each seed is an input database for `attnlab db merge`. The schema comes
from attnlab itself (`attnlab db merge NEW.db` creates an empty one),
rewritten with 512-byte pages so a seed stays small, then filled by
hand: a valid file whose ids collide with the fuzzer's OUT (runs 1, 2,
ablations 1, 2, the same model), a file with a merged run and a
sweep_task row, and one case next to each validation rule (a missing
table, a missing column, a wrong column type, a schema version from the
future and from the past, a run without a uid, a dangling model, not
SQLite at all). Seeds are under 100 KB."""
import os, shutil, sqlite3, subprocess, sys, tempfile

binary = sys.argv[1] if len(sys.argv) > 1 else "build/attnlab"
out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "merge")
os.makedirs(out_dir, exist_ok=True)

SHA_OUT = "a" * 64  # the model OUT has (fuzz_merge.c)
SHA_NEW = "b" * 64


def fresh(tmp):
    """An empty database of attnlab's schema, 512-byte pages, no WAL."""
    p = os.path.join(tmp, "schema.db")
    if not os.path.exists(p):
        subprocess.run([binary, "db", "merge", p], check=True, capture_output=True)
        c = sqlite3.connect(p)
        c.execute("PRAGMA journal_mode = DELETE")
        c.execute("PRAGMA page_size = 512")
        c.execute("VACUUM")
        c.close()
    q = os.path.join(tmp, "work.db")
    shutil.copy(p, q)
    return q


def fill(c, uid_base, rows=3):
    c.executescript(f"""
    INSERT INTO models(model_id, sha256, path, n_layers, d_model, n_heads, added_at)
      VALUES(1, '{SHA_OUT}', '/m/a', 2, 32, 4, 't'), (2, '{SHA_NEW}', '/m/b', 1, 32, 4, 't');
    INSERT INTO runs(run_id, kind, config_json, model_id, started_at, finished_at, status,
                     attnlab_version, uid)
      VALUES(1, 'ablate', '{{"method": "zero"}}', 1, 't', 't', 'done', '0.1', '{uid_base}1'),
            (2, 'attribute', '{{}}', 2, 't', 't', 'done', '0.1', '{uid_base}2'),
            (3, 'scores', '{{}}', 1, 't', NULL, 'failed', '0.1', '{uid_base}3'),
            (4, 'patch', '{{}}', 1, 't', NULL, 'running', '0.1', '{uid_base}4');
    INSERT INTO ablations(ablation_id, run_id, model_id, method, kind, heads, n_heads, loss,
                          delta_loss) VALUES(1, 1, 1, 'zero', 'single', '0.1', 1, 3.5, 0.25),
                          (2, 1, 1, 'zero', 'pair', '0.1,1.2', 2, 3.75, 0.5),
                          (3, 3, 1, 'zero', 'single', '0.3', 1, 9, 1);
    INSERT INTO head_scores VALUES(1, 1, 0, 0, 'induction', 0.5), (1, 1, 1, 3, 'prev_token', NULL);
    INSERT INTO attribution_runs(run_id, model_id, task, n_pairs, seq_len, n_items, metric_kind)
      VALUES(2, 2, 'induction', 4, 13, 4, 'logprob');
    INSERT INTO logit_lens VALUES(2, 2, 'induction', 0, 4.5, 0.25), (2, 2, 'induction', 1, 2.5, 0.5);
    INSERT INTO attribution_tokens VALUES(2, 0, 17, 'a' || char(0) || 'b'), (2, 1, 18, X'FF00FE');
    """)
    c.executemany("INSERT INTO train_log VALUES(2, ?, ?, ?, ?, 0, 0.001, ?)",
                  [(s, s * 64.0, 5.0 / (s + 1), 5.5 / (s + 1), s * 0.01) for s in range(rows)])


def save(name, path):
    shutil.copy(path, os.path.join(out_dir, name))
    assert os.path.getsize(path) < 100_000, name


with tempfile.TemporaryDirectory() as tmp:
    def case(name, uid_base="c" * 31, sql="", rows=3, version=None):
        p = fresh(tmp)
        c = sqlite3.connect(p)
        fill(c, uid_base, rows)
        if sql:
            c.executescript(sql)
        if version is not None:
            c.execute(f"PRAGMA user_version = {version}")
        c.commit()
        c.execute("VACUUM")
        c.close()
        save(name, p)

    # valid: ids 1, 2 collide with OUT's runs and ablations, model 1 is OUT's
    case("good.db")
    # one run OUT already has (its uid), one merged before with its source
    case("present-and-merged.db", uid_base="0123456789abcdef0123456789abcde",
         sql="INSERT INTO merge_sources VALUES(7, 'task3.db', '2026-01-01T00:00:00.000Z', 'sweep', "
             "3, 8, 'train.lr=0.01', 42, '{}'); UPDATE runs SET source_id = 7 WHERE run_id = 2;"
             "INSERT INTO sweep_task VALUES(1, 'sweep', 0, 8, '', NULL, '{}');")
    # many rows of one run (the test merges 3 x 10^5; a seed stays under 100 KB)
    case("rows.db", uid_base="d" * 31, rows=500)
    case("missing-table.db", sql="DROP TABLE circuit_edges;")
    case("missing-column.db", sql="ALTER TABLE logit_lens DROP COLUMN accuracy;")
    case("wrong-type.db",
         sql="ALTER TABLE logit_lens RENAME TO old; CREATE TABLE logit_lens(run_id INTEGER, "
             "model_id INTEGER, task TEXT, layer TEXT, loss REAL, accuracy REAL); DROP TABLE old;")
    case("future.db", version=99)
    case("older.db", version=5)
    case("no-uid.db", sql="UPDATE runs SET uid = NULL WHERE run_id = 2;")
    case("dangling.db", sql="UPDATE runs SET model_id = 9 WHERE run_id = 1;")
    case("orphan-rows.db", sql="UPDATE logit_lens SET run_id = 99;")
    # a WAL-mode header with no -wal file beside it
    p = fresh(tmp)
    c = sqlite3.connect(p)
    fill(c, "e" * 31)
    c.commit()
    c.execute("PRAGMA journal_mode = WAL")
    c.close()
    save("wal-header.db", p)
    with open(os.path.join(out_dir, "not-sqlite.db"), "wb") as f:
        f.write(b"SQLite format 3\0" + bytes(range(256)) * 4)
    with open(os.path.join(out_dir, "empty.db"), "wb") as f:
        pass
print("seeds in", out_dir, sorted(os.listdir(out_dir)))
