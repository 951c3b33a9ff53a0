"""The OME-Zarr metadata model: versions, metadata documents, transformations and their
graph, extensions. It imports neither read, write, tables nor validate."""
