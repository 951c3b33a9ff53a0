"""Reading OME-Zarr: documents, opening, lazy arrays, fast chunk reads, plates."""
