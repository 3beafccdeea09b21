"""This project's gymnasium environments, registered under the `envs/` namespace when the package is imported."""
