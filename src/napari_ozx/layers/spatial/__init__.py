"""SpatialData's points, shapes and tables as napari layer data (:mod:`.elements`)."""
