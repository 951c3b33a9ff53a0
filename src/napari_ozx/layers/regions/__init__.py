"""One region of an image as its own layers: :mod:`.crop` (``open_roi``)."""
