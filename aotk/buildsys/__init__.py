"""``aotk build``: a manifest of kernels and variants -> lib<name>.so + <name>.h + <name>.d."""
