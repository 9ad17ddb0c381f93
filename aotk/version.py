"""The aotk version: in built libraries, their info and every compile cache key."""
__version__ = "0.1.0"
