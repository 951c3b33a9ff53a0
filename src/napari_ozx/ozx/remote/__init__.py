"""Remote ``.ozx`` and OME-Zarr over HTTP(S)/S3: range readers and stores."""
