"""The ``aotk`` command line (installed as the package ``aotk_cli``)."""
