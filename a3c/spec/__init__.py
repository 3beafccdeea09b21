"""What a run is: its settings (Config and their validation), the per-env presets, the env description (EnvSpec,
make_env), the user errors, and the run's named seed streams. The bottom layer: imports nothing else of a3c (and no
torch), so the command line checks its input before anything heavy is loaded."""
