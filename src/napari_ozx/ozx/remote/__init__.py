"""Remote ``.ozx`` and OME-Zarr over HTTP(S)/S3: range readers and stores."""

__all__ = ["REMOTE_SCHEMES", "is_url"]

#: the URL schemes napari-ozx reads remotely
REMOTE_SCHEMES = ("http://", "https://", "s3://", "gs://", "gcs://", "az://", "abfs://")


def is_url(source: object) -> bool:
    """Whether *source* names a remote file or folder (a URL of :data:`REMOTE_SCHEMES`);
    here, not in :mod:`.source`, so that a local open imports no remote code."""
    return isinstance(source, str) and source.lower().startswith(REMOTE_SCHEMES)
