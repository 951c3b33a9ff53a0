"""The OME-Zarr validator: rules as data, checks by section, the walker."""
