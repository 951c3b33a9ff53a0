"""Writing OME-Zarr: options, the write plan, local and cluster writers, convert."""
