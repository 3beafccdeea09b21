"""What a run is: its settings (flags.py: how a flag is declared and the names it takes; config.py: Config;
validation.py: the checks), the presets (presets.py: the file and its tables, one objective each; preset_choice.py:
the table a new run takes; config_text.py: what a run says about them), the env description (environment.py:
EnvSpec, make_env; batch.py and env_batch.py: a worker's K envs and the registry of their backends), the user errors,
and the run's named seed streams. The bottom layer: imports nothing else of a3c (and no torch; this project's envs/
package, which it registers, imports nothing of a3c), so the command line checks its input before anything heavy is
loaded."""
