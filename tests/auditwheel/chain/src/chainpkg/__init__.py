"""A package whose extension module links a chain of external shared libraries."""
