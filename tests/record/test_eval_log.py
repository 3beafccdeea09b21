"""eval.csv (a3c.record.eval_log): read back, and trimmed to the evaluations a checkpoint covers."""

from a3c.record.eval_log import CSV_COLUMNS, read_eval_log


def test_eval_log_trimmed_to_a_checkpoint(tmp_path):
    path = tmp_path / "eval.csv"
    path.write_text(
        ",".join(CSV_COLUMNS)
        + "\n"
        + "\n".join(f"{s},1.0,0.0,1.0,1.0,1.0,2,0.1,3.0" for s in (100, 200, 300))
        + "\n300,1.0,0.0"  # a row cut by a crash
    )
    kept = read_eval_log(path, max_step=200)
    assert [r["global_step"] for r in kept] == [100, 200]
    assert [r["global_step"] for r in read_eval_log(path)] == [100, 200]  # the file itself was rewritten
