"""``python -m aotk``: the command line."""
from aotk.cli_entry import import_cli

import_cli().main(prog_name="aotk")
