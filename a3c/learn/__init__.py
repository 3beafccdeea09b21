"""The maths of A3C, with no process and no file: the model built from the spaces, the policy distributions, the
losses (pure functions of tensors), the shared optimizers over one flat tensor, and the running statistics."""
