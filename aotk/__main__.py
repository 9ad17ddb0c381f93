"""``python -m aotk``: the command line."""
from aotk_cli.main import main

main(prog_name="aotk")
