"""The CPU reference: executes kir with numpy, program by program."""
from .executor import run

__all__ = ["run"]
