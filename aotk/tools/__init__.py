"""Host-side helpers with Triton's module paths (``triton.tools.*``)."""
