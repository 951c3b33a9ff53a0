"""Metadata newer writers add beside OME-Zarr 0.6: development versions (0.9.devN,
1.0-DEV), RFC-4 anatomical orientation, RFC-8 collections (draft)."""
