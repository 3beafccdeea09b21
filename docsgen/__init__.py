"""What the docs site (mkdocs.yml) generates when it is built, so that no page can drift from what it describes:
the command-line reference from the argument parsers themselves (cli_reference.py) and the benchmark tables from
the JSON the benchmark scripts wrote (bench_tables.py). hooks.py is the MkDocs hook that puts both into the pages.
Not part of the installed package (pyproject.toml ships a3c and envs only)."""
