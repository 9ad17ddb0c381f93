"""Failures of an external tool (missing binary, rejected PTX), with the tool's own words."""


class ToolchainError(RuntimeError):
    pass
