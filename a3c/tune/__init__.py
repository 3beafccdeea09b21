"""``python -m a3c.tune``: hyperparameter search with Optuna (pip install -e ".[tune]"). Each trial is an ordinary
a3c run in the study's directory; the study lives in a database and resumes after Ctrl-C or a crash. The modules,
one job each: cli.py (the command line), study.py (the study directory, its database, the loop over trials),
trial.py (one trial: an a3c run reporting its evaluations to the pruner), space.py (+ space.toml, space_ppo.toml: the
search space, by objective), check.py (the space judged with the flags given, before the first trial) and
results.py (the best trial as a preset block, Optuna's figures). docs/guides/tune-and-track.md shows a study's
results.

Importing this package imports neither Optuna nor torch (cli.py checks that Optuna is installed first)."""
