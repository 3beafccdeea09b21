"""What a run leaves and reading it back: the run directory's files, checkpoints, the dashboard (TensorBoard events
and the progress bar), figures, the TensorBoard server, the evaluation log, the schema of the rows workers publish,
and Agent, a policy read back from a checkpoint. Knows no process: the dashboard reads through a small protocol
that the run layer's coordinators satisfy."""
